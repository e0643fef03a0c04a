package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
)

// TestRoutesKeepSeparateQuotas drives the example from outside, over
// HTTP: a global middleware on chi keeps one quota per route pattern.
func TestRoutesKeepSeparateQuotas(t *testing.T) {
	store := memstore.MustNew()
	defer store.Close()
	clock := core.NewManualClock(time.Unix(1_700_000_000, 0))
	h, err := newRouter(store, core.WithClock(clock))
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	defer srv.Close()
	get := func(path string) int {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	var users []int
	for _, id := range []string{"1", "2", "3", "4", "5", "6"} {
		users = append(users, get("/users/"+id))
	}
	assert.Equal(t, []int{200, 200, 200, 200, 200, 429}, users, "/users/{id}: one quota for every id")
	for range 5 {
		assert.Equal(t, 200, get("/items"), "/items has its own quota")
	}
	assert.Equal(t, 429, get("/items"))
	clock.Advance(12 * time.Second)
	assert.Equal(t, 200, get("/users/7"))
}
