package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/limitkit/limitkit/internal/redistest"
)

// start runs the example on free loopback ports and returns its gRPC and
// HTTP addresses; it stops with the test.
func start(t *testing.T, args ...string) (grpcAddr, httpAddr string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	readyc := make(chan [2]string, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"-grpc", "127.0.0.1:0", "-http", "127.0.0.1:0"}, args...), io.Discard,
			func(g, h string) { readyc <- [2]string{g, h} })
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	select {
	case a := <-readyc:
		return a[0], a[1]
	case err := <-done:
		t.Fatalf("run: %v", err)
	}
	return "", ""
}

// shareOneQuota sends 30 requests for one API key through the Go service
// and 30 as Envoy would, from 12 goroutines: the default rule's 10 a
// minute are admitted exactly, in total. The window is a minute aligned
// to the epoch (the reference's); a test that straddles a minute boundary
// sees a second window, so the minute is checked around the burst and the
// burst repeated on a new key when it was crossed.
func shareOneQuota(t *testing.T, grpcAddr, httpAddr string) {
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := pb.NewRateLimitServiceClient(conn)
	hc := &http.Client{}
	for range 5 {
		key := "client-" + time.Now().Format("150405.000000")
		minute := time.Now().Unix() / 60
		// in turn: 6 through the Go service leave Envoy 4
		seq := key + "-seq"
		for range 6 {
			if code := get(t, hc, httpAddr, seq); code != http.StatusOK {
				t.Fatalf("status %d", code)
			}
		}
		var okRLS int
		var firstRemaining uint32
		for i := range 6 {
			resp := ask(t, client, seq)
			if i == 0 {
				firstRemaining = resp.Statuses[0].LimitRemaining
			}
			if resp.OverallCode == pb.RateLimitResponse_OK {
				okRLS++
			}
		}
		afterHTTP := get(t, hc, httpAddr, seq)

		var admitted, viaHTTP, viaRLS atomic.Int64
		var wg sync.WaitGroup
		for w := range 12 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 5 {
					if w%2 == 0 {
						req, _ := http.NewRequest("GET", "http://"+httpAddr+"/hello", nil)
						req.Header.Set("X-Api-Key", key)
						resp, err := hc.Do(req)
						if err != nil {
							t.Error(err)
							return
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						switch resp.StatusCode {
						case http.StatusOK:
							admitted.Add(1)
							viaHTTP.Add(1)
						case http.StatusTooManyRequests:
						default:
							t.Errorf("status %d", resp.StatusCode)
						}
						continue
					}
					resp, err := client.ShouldRateLimit(context.Background(), &pb.RateLimitRequest{Domain: "edge",
						Descriptors: []*rlpb.RateLimitDescriptor{{Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: "api_key", Value: key}}}}})
					if err != nil {
						t.Error(err)
						return
					}
					if resp.OverallCode == pb.RateLimitResponse_OK {
						admitted.Add(1)
						viaRLS.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		if time.Now().Unix()/60 != minute {
			continue // the burst straddled two windows: again, on a new key
		}
		if okRLS != 4 || firstRemaining != 3 || afterHTTP != http.StatusTooManyRequests {
			t.Fatalf("after 6 through HTTP, ShouldRateLimit admitted %d of 6 (want 4), first limit_remaining %d (want 3); HTTP then %d (want 429)",
				okRLS, firstRemaining, afterHTTP)
		}
		if got := admitted.Load(); got != 10 {
			t.Fatalf("admitted %d (HTTP %d, RLS %d); want exactly the limit, 10", got, viaHTTP.Load(), viaRLS.Load())
		}
		t.Logf("admitted 10: %d through HTTP, %d through ShouldRateLimit", viaHTTP.Load(), viaRLS.Load())
		return
	}
	t.Fatal("every burst straddled a minute boundary")
}

// TestSharedQuotaEmbedded: without -redis, one embedded store serves both.
// (Run it with go test ./_examples/rls; ./... does not reach _examples.)
func TestSharedQuotaEmbedded(t *testing.T) {
	g, h := start(t)
	shareOneQuota(t, g, h)
}

// TestSharedQuotaRedis: with -redis each side has its own client and
// store, and the quota is shared through Redis.
func TestSharedQuotaRedis(t *testing.T) {
	node := redistest.StartNode(t)
	g, h := start(t, "-redis", node.Addr)
	shareOneQuota(t, g, h)
}

// TestBadConfig: a configuration without the (api_key, <key>) limit is
// refused at start with what is missing.
func TestBadConfig(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/c.yaml"
	if err := writeFile(path, "domain: edge\ndescriptors:\n  - key: other\n    rate_limit: {unit: second, requests_per_unit: 1}\n"); err != nil {
		t.Fatal(err)
	}
	err := run(context.Background(), []string{"-config", path, "-grpc", "127.0.0.1:0", "-http", "127.0.0.1:0"}, io.Discard, nil)
	if err == nil || !contains(err.Error(), "no limit for the descriptor (api_key") {
		t.Fatalf("err = %v", err)
	}
}

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o600) }

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func get(t *testing.T, hc *http.Client, addr, key string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+addr+"/hello", nil)
	req.Header.Set("X-Api-Key", key)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func ask(t *testing.T, c pb.RateLimitServiceClient, key string) *pb.RateLimitResponse {
	t.Helper()
	resp, err := c.ShouldRateLimit(context.Background(), &pb.RateLimitRequest{Domain: "edge",
		Descriptors: []*rlpb.RateLimitDescriptor{{Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: "api_key", Value: key}}}}})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}
