// Command redis-cluster serves the example API (net/http, the nethttp
// adapter, the endpoint table) with its state in a Redis Cluster, so that
// every instance pointed at the cluster shares one quota.
//
// Start a local three-master cluster (ports 7000-7002) with redis-server
// and redis-cli:
//
//	for p in 7000 7001 7002; do
//	  mkdir -p /tmp/rc/$p
//	  redis-server --port $p --cluster-enabled yes --cluster-config-file nodes.conf \
//	    --dir /tmp/rc/$p --save "" --appendonly no --daemonize yes
//	done
//	redis-cli --cluster create 127.0.0.1:7000 127.0.0.1:7001 127.0.0.1:7002 \
//	  --cluster-replicas 0 --cluster-yes
//
// Then run two instances and send traffic to both:
//
//	go run ./_examples/redis-cluster -addr :8080 -cluster 127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002 &
//	go run ./_examples/redis-cluster -addr :8081 -cluster 127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002 &
//	for i in $(seq 60); do curl -s -o /dev/null -w '%{http_code}\n' localhost:808$((i%2))/x; done | sort | uniq -c
//	# 50 200, 10 429: one quota of 50 per minute across both instances
//
// Stop the cluster: for p in 7000 7001 7002; do redis-cli -p $p shutdown nosave; done
//
// Every key a decision touches lives under one hash tag, so each decision
// is a single-slot script on one master. Flags: the examples' flags
// (-addr, -rules, -trusted-proxies, -jwt-secret, -allow-degraded, -sync,
// -fleet-size, -watch; -redis is ignored; SIGHUP reloads -rules) plus -cluster, the seed nodes: comma-separated host:port
// (default the three above) or a URL, redis://[user:password@]host:port[,host:port...]
// (rediss:// for TLS), read by redisstore.NewClient, which tunes the client
// for a limiter. Every master is checked at start-up; metrics are at
// /metrics.
package main

import (
	"errors"
	"flag"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/limitkit/limitkit/_examples/exampleapp"
)

func main() {
	// -cluster is this program's own flag; the rest are the shared ones.
	seeds, given, rest := exampleapp.CutFlag(os.Args[1:], "cluster")
	if !given {
		seeds = "127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002"
	}
	client, err := exampleapp.ClusterClient(seeds) // redisstore.NewClient, tuned for a limiter
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	// Start checks every master (reachable, Redis >= 5, cluster state ok,
	// scripts loaded) before binding -addr.
	app, ln, err := exampleapp.Start("redis-cluster", rest, exampleapp.WithRedisClient(client))
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	defer app.Close()
	rs, h, err := app.HTTPHandler() // the rules served by serve.NewNetHTTP
	if err != nil {
		log.Fatal(err)
	}
	defer app.StartReloads(rs.Live())() // SIGHUP reloads -rules; -watch also on change
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	app.LogStartup("redis-cluster", ln)
	log.Fatal(srv.Serve(ln))
}
