package redisstore_test

import (
	"fmt"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/redisstore"
	"github.com/redis/go-redis/v9"
)

// A Redis store behind a two-limit policy. New does no I/O; the first
// decision connects.
func Example() {
	client := redis.NewClient(&redis.Options{
		Addr:                  "127.0.0.1:0", // your Redis
		ContextTimeoutEnabled: true,          // lets the limiter's deadline bound every call
	})
	defer client.Close()
	store, err := redisstore.New(client, redisstore.WithPrefix("myapp:"))
	if err != nil {
		fmt.Println(err)
		return
	}
	limiter, err := core.NewLimiter(store, core.Policy{
		Name:   "api",
		Limits: []core.Limit{core.Per(900, 15*time.Minute), core.PerMinute(200)},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	keys, _ := store.Keys(limiter.Policy(), "user-42")
	fmt.Println(len(keys), "keys, one slot:", keys[0][:len("myapp:{")], "...")
	// Output:
	// 2 keys, one slot: myapp:{ ...
}

// New refuses a client that would ignore the limiter's deadline.
func ExampleNew() {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:0"})
	defer client.Close()
	_, err := redisstore.New(client)
	fmt.Println(err != nil)
	// Output: true
}

// The keys of one decision: a fixed-length hash tag whatever the key, so
// hostile input cannot shape Redis keys or spread one decision over slots.
func ExampleStore_Keys() {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:0", ContextTimeoutEnabled: true})
	defer client.Close()
	store, _ := redisstore.New(client)
	p := &core.Policy{Name: "login", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerMinute(10), core.PerHour(50)}}
	for _, key := range []string{"alice", "}{\n\x00" + string(make([]byte, 65536))} {
		keys, _ := store.Keys(p, key)
		fmt.Println(len(keys[0]), len(keys[1]), keys[0][:19] == keys[1][:19])
	}
	// Output:
	// 29 29 true
	// 29 29 true
}
