// Package readme holds the test that compiles every Go snippet of the
// repository's README.md and of its docs/*.md guides, so that their code
// can be copied as written.
//
// A snippet that starts with a package clause is a whole program and is
// built as is. Any other snippet is a fragment: if it starts with "var" it
// is compiled at package level, else as the body of a function. A
// fragment's free variables are declared by an HTML comment on the line
// before its fence, invisible on GitHub:
//
//	<!-- snippet vars: store memstore.Store; mux *http.ServeMux -->
//
// Fragments see the packages listed in [FragmentImports]. Locals a
// fragment declares must be used, as in real code.
//
// A snippet that needs a package this module does not depend on is left
// out only by a comment on the line before its fence that says why; the
// test counts such snippets and requires the reason:
//
//	<!-- snippet not compiled: otelhttp is not a dependency of this module -->
package readme

// FragmentImports are the packages a fragment may use: import path, and
// one of its names that keeps the import used when the fragment does not.
var FragmentImports = [][2]string{
	{"context", "context.Background"},
	{"log", "log.Fatal"},
	{"net", "net.Listen"},
	{"net/http", "http.Handle"},
	{"os", "os.Getenv"},
	{"time", "time.Second"},
	{"github.com/prometheus/client_golang/prometheus", "prometheus.MustRegister"},
	{"github.com/prometheus/client_golang/prometheus/promhttp", "promhttp.Handler"},
	{"github.com/redis/go-redis/v9", "redis.NewClient"},
	{"google.golang.org/grpc", "grpc.NewServer"},
	{"go.opentelemetry.io/otel/trace", "trace.SpanFromContext"},
	{"github.com/limitkit/limitkit/core", "core.PerMinute"},
	{"github.com/limitkit/limitkit/core/fleet", "fleet.New"},
	{"github.com/limitkit/limitkit/core/memstore", "memstore.New"},
	{"github.com/limitkit/limitkit/core/redisstore", "redisstore.New"},
	{"github.com/limitkit/limitkit/keyfuncs", "keyfuncs.PeerIP"},
	{"github.com/limitkit/limitkit/metrics", "metrics.New"},
	{"github.com/limitkit/limitkit/otellimit", "otellimit.New"},
	{"github.com/limitkit/limitkit/nethttp", "nethttp.New"},
	{"github.com/limitkit/limitkit/grpclimit", "grpclimit.New"},
	{"github.com/limitkit/limitkit/httplimit", "httplimit.WithKey"},
	{"github.com/limitkit/limitkit/rules", "rules.ParseLimit"},
	{"github.com/limitkit/limitkit/rules/serve", "serve.BearerToken"},
}
