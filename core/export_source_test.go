package core

// SourcedLen is the number of identities s has cached.
func SourcedLen(s *Sourced) int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}

// SourcedWaiting is the number of requests waiting for a lookup.
func SourcedWaiting(s *Sourced) int64 { return s.waiting.Load() }

// SourcedSets is the number of live limit sets of s.
func SourcedSets(s *Sourced) int {
	s.setsMu.Lock()
	defer s.setsMu.Unlock()
	return len(s.sets)
}
