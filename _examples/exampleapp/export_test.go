package exampleapp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/internal/redistest"
)

// TestExportThreeInFlight: two app instances on one Redis, 10 concurrent
// exports of one user (each working until its client goes away): exactly
// 3 run, 7 are 429 with Retry-After; once the 3 end, 3 more run.
func TestExportThreeInFlight(t *testing.T) {
	srv := redistest.StartNode(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	defer c.Close()
	var hs []http.Handler
	var tok string
	for range 2 {
		app, err := New(Config{JWTSecret: "shared-secret-shared"}, WithRedisClient(c), WithStoreTimeout(redistest.StoreTimeout))
		require.NoError(t, err)
		defer app.Close()
		_, h, err := app.HTTPHandler()
		require.NoError(t, err)
		hs = append(hs, h)
		tok, err = app.Token("alice", 3600e9)
		require.NoError(t, err)
	}
	for round := 0; round < 2; round++ {
		ctx, cancel := context.WithCancel(context.Background())
		codes := make(chan *httptest.ResponseRecorder, 10)
		var wg sync.WaitGroup
		for i := 0; i < 10; i++ {
			wg.Add(1)
			go func(h http.Handler) {
				defer wg.Done()
				r := httptest.NewRequest("GET", ExportPath+"?ms=60000", nil).WithContext(ctx)
				r.RemoteAddr = "198.51.100.9:1234"
				r.Header.Set("Authorization", "Bearer "+tok)
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				codes <- w
			}(hs[i%2])
		}
		// the 7 refused answer while the 3 admitted still work
		for i := 0; i < 7; i++ {
			w := <-codes
			require.Equal(t, http.StatusTooManyRequests, w.Code, "round %d: %s", round, w.Body.String())
			assert.NotEmpty(t, w.Header().Get("Retry-After"))
			assert.Equal(t, "3", w.Header().Get("X-RateLimit-Limit"))
		}
		select {
		case w := <-codes:
			t.Fatalf("round %d: an eighth request ended while the admitted ones work: %d", round, w.Code)
		default:
		}
		cancel() // the 3 clients go away: their handlers return
		wg.Wait()
		close(codes)
		n := 0
		for w := range codes {
			assert.NotEqual(t, http.StatusTooManyRequests, w.Code)
			n++
		}
		require.Equal(t, 3, n, "round %d", round)
	}
}

// TestExportValidatesMS: ms is an integer 0..60000, else 400.
func TestExportValidatesMS(t *testing.T) {
	for _, ms := range []string{"-1", "60001", "abc", "1e3", "99999999999999999999"} {
		code, body := Export(context.Background(), ms)
		assert.Equal(t, http.StatusBadRequest, code, ms)
		assert.Contains(t, string(body), "between 0 and 60000")
	}
	code, body := Export(context.Background(), "0")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, string(body), `"ms":0`)
	code, _ = Export(context.Background(), "")
	assert.Equal(t, http.StatusOK, code)
}
