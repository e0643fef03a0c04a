package redisstore

import (
	"context"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
)

// TestVerbsRedisCPU reports Redis's CPU per script call of each verb
// (INFO commandstats, usec_per_call of evalsha, reset between verbs),
// with Take as the baseline, for each algorithm ported. Run with
// LIMITKIT_VERB_CPU=1 (a figure, not a check).
func TestVerbsRedisCPU(t *testing.T) {
	if os.Getenv("LIMITKIT_VERB_CPU") == "" {
		t.Skip("set LIMITKIT_VERB_CPU=1 to measure")
	}
	s, c, _ := nodeStore(t)
	ctx := context.Background()
	re := regexp.MustCompile(`cmdstat_evalsha:calls=(\d+),usec=\d+,usec_per_call=([0-9.]+)`)
	for _, alg := range []core.Algorithm{core.GCRA, core.TokenBucket, core.FixedWindow, core.SlidingWindowCounter} {
		pol := core.Policy{Name: "cpu-" + alg.String(), Algorithm: alg, Limits: []core.Limit{core.PerMinute(1000)}}
		if alg == core.SlidingWindowCounter {
			pol.Buckets = 10
		}
		p := mustPolicy(t, pol)
		now := time.Now()
		for _, v := range []byte("APCRWX") {
			_, err := storeVerb(ctx, s, v, "warm", p, now, 1) // loads the script
			require.NoError(t, err)
			require.NoError(t, c.ConfigResetStat(ctx).Err())
			const n = 2000
			for i := range n {
				_, err := storeVerb(ctx, s, v, "k"+strconv.Itoa(i%50), p, now.Add(time.Duration(i)*time.Millisecond), 3)
				require.NoError(t, err)
			}
			info, err := c.Info(ctx, "commandstats").Result()
			require.NoError(t, err)
			m := re.FindStringSubmatch(info)
			require.NotNil(t, m, info)
			t.Logf("%-22s %c  calls=%s  usec_per_call=%s", alg, v, m[1], m[2])
		}
	}
}
