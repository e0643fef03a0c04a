package core

// replyHint says what to look at for a store's error reply of kind k
// (the log line's hint; see hint).
func replyHint(k errorKind) string {
	switch k {
	case kindTryAgain:
		return "the store asked to retry (Redis TRYAGAIN: a slot migration split the decision's keys); it passes when the migration moves them"
	case kindClusterDown:
		return "the store cannot serve the key now (Redis CLUSTERDOWN or MASTERDOWN: a failover or a lost shard); check CLUSTER INFO"
	case kindRedirect:
		return "the key lives on another node and the client did not follow (Redis MOVED or ASK): the cluster is resharding; check the client's redirect limit"
	case kindReadOnly:
		return "the store refused a write (Redis READONLY: the client sent it to a replica, e.g. a demoted master); it passes when the client reloads its topology"
	case kindLoading:
		return "the store is loading its data after a start (Redis LOADING); it passes when the load is done"
	case kindOOM:
		return "the store is out of memory and refuses writes (Redis OOM under maxmemory with noeviction): raise maxmemory; denials still work"
	case kindScript:
		return "the store's script failed (a script error): a bug or an incompatible server; see err"
	}
	return "the store answered with an error (a script error, a bad reply or a closed store): see err"
}
