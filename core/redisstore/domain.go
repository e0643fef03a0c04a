package redisstore

import (
	"context"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/storekit"
	"github.com/redis/go-redis/v9"
)

var _ storekit.DomainStore = (*redisStore)(nil)

// noIO is an already cancelled context: a go-redis call under it returns
// before dialing or sending anything.
var noIO = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// Domain returns the failure domain of key's state under p (see
// storekit.DomainStore): on a Cluster client, the address of the master that
// serves the slot of key's hash tag in the client's cached slot map (every
// key of one decision shares the tag, hence the slot); "" on a node,
// Sentinel or Ring client, for an invalid policy, and while the client has
// no slot map yet. It does no I/O: it reads go-redis's cached cluster
// state (whose periodic reload, when due, go-redis starts in the
// background). The fleet tier keeps a breaker per domain.
func (s *redisStore) Domain(key string, p *core.Policy) string {
	cc, ok := s.client.(*redis.ClusterClient)
	if !ok || p == nil {
		return ""
	}
	c, err := s.policy(p)
	if err != nil {
		return ""
	}
	var kb [maxKeyBase]byte
	m, err := cc.MasterForKey(noIO, string(s.keyBase(kb[:0], c, key)))
	if err != nil || m == nil {
		return ""
	}
	return m.Options().Addr
}
