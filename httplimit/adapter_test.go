package httplimit

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/httplimit/internal/respond"
)

// counting is an adapter that reports outcomes, for the tests of
// WithOutcome.
var counting = Adapter{Name: "x", Outcome: true}

// handler is an adapter option's type in these tests, as an adapter's
// deny handler is.
type handler func(status int) string

// TestAdapterRefusesWhatItCannotHonour: every option an adapter would
// silently ignore is a construction error naming the option and what to
// do instead, and the same option is accepted by an adapter that honours
// it.
func TestAdapterRefusesWhatItCannotHonour(t *testing.T) {
	ms := memstore.MustNew()
	defer ms.Close()
	l := core.MustNewLimiter(ms, core.Policy{Name: "api", Limits: []core.Limit{core.PerMinute(1)}})
	h := handler(func(int) string { return "h" })
	grpc := Adapter{Name: "g", NoHTTPResponse: true, Denials: "g denies with a code"}
	mine := Adapter{Name: "m", Options: map[string]reflect.Type{"WithHandler": reflect.TypeFor[handler]()}}
	other := Adapter{Name: "o", Options: map[string]reflect.Type{"WithHandler": reflect.TypeFor[handler]()}}
	for _, tc := range []struct {
		name    string
		a       Adapter
		opts    []Option
		want    string // "" accepted
		honours Adapter
	}{
		{"deny status, no HTTP response", grpc, []Option{WithDenyStatus(418)},
			"g: httplimit.WithDenyStatus shapes an HTTP response, which a g middleware does not write: remove it (g denies with a code)", mine},
		{"deny body, no HTTP response", grpc, []Option{WithScope("s"), WithDenyBody("text/plain", []byte("no"))},
			"g: httplimit.WithDenyBody shapes an HTTP response, which a g middleware does not write: remove it (g denies with a code)", mine},
		{"outcome, adapter reports none", mine, []Option{WithOutcome(Outcome{Count: StatusIn(401)})},
			"m: httplimit.WithOutcome counts by the response's outcome, which a m middleware does not report (it never calls Engine.Outcome): remove it", counting},
		{"misspelt adapter option", mine, []Option{AdapterOption("m", "WithHandlr", h)},
			"m: m.WithHandlr is not an option of package m (it reads WithHandler)", Adapter{Name: "m", Options: map[string]reflect.Type{"WithHandlr": reflect.TypeFor[handler]()}}},
		{"adapter option of an adapter that declares none", Adapter{Name: "m"}, []Option{AdapterOption("m", "WithHandler", h)},
			"m: m.WithHandler is not an option of package m (it reads none)", mine},
		{"adapter option of another type", mine, []Option{AdapterOption("m", "WithHandler", func(string) int { return 0 })},
			"m: m.WithHandler: a func(string) int given, want a httplimit.handler", Adapter{Name: "m", Options: map[string]reflect.Type{"WithHandler": reflect.TypeFor[func(string) int]()}}},
		{"another adapter's option it has", other, []Option{AdapterOption("m", "WithHandler", h)},
			"o: m.WithHandler is an option of package m, given to an o middleware: use o.WithHandler", mine},
		{"another adapter's option it lacks", grpc, []Option{AdapterOption("m", "WithHandler", h)},
			"g: m.WithHandler is an option of package m, given to a g middleware: package g has no equivalent", mine},
		{"another adapter's deny handler it lacks", grpc, []Option{AdapterOption("m", "WithDenyHandler", h)},
			"g: m.WithDenyHandler is an option of package m, given to a g middleware: package g has no equivalent (g denies with a code)",
			Adapter{Name: "m", Options: map[string]reflect.Type{"WithDenyHandler": reflect.TypeFor[handler]()}}},
		{"another adapter's outcome, to an HTTP adapter", counting, []Option{AdapterOption("m", "WithOutcome", Outcome{Count: StatusIn(1016)})},
			"x: m.WithOutcome is an option of package m, given to a x middleware: use httplimit.WithOutcome, whose Count sees HTTP statuses",
			Adapter{Name: "m", Options: map[string]reflect.Type{"WithOutcome": reflect.TypeFor[func(int) bool]()}, Outcome: true}},
		{"another adapter's outcome, to one without HTTP responses", Adapter{Name: "g", Outcome: true, NoHTTPResponse: true},
			[]Option{AdapterOption("m", "WithOutcome", Outcome{Count: StatusIn(1016)})},
			"g: m.WithOutcome is an option of package m, given to a g middleware: use httplimit.WithOutcome, whose Count sees HTTP statuses",
			Adapter{Name: "m", Options: map[string]reflect.Type{"WithOutcome": reflect.TypeFor[func(int) bool]()}, Outcome: true}},
		{"another adapter's outcome, to one that counts none", Adapter{Name: "e"}, []Option{AdapterOption("m", "WithOutcome", Outcome{Count: StatusIn(1016)})},
			"e: m.WithOutcome is an option of package m, given to an e middleware: package e has no equivalent",
			Adapter{Name: "m", Options: map[string]reflect.Type{"WithOutcome": reflect.TypeFor[func(int) bool]()}, Outcome: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewAdapterEngine(tc.a, l, tc.opts...)
			require.Error(t, err)
			assert.Equal(t, tc.want, err.Error())
			_, err = NewAdapterEngine(tc.honours, l, tc.opts...)
			assert.NoError(t, err, "an adapter that honours it")
		})
	}
	// newEngineNamed is an HTTP adapter without adapter options or outcomes
	_, err := newEngineNamed("n", l, WithDenyStatus(418), WithDenyBody("text/plain", nil))
	assert.NoError(t, err)
	_, err = newEngineNamed("n", l, WithOutcome(Outcome{Count: StatusIn(401)}))
	assert.ErrorContains(t, err, "n: httplimit.WithOutcome counts by the response's outcome")
}

// TestAdapterOptionValue: a declared option's value is read back with
// its declared type, even when given as a value merely assignable to it
// (a function literal of the handler's signature); not given, it is the
// zero value; read as another type, it is an error.
func TestAdapterOptionValue(t *testing.T) {
	ms := memstore.MustNew()
	defer ms.Close()
	l := core.MustNewLimiter(ms, core.Policy{Name: "api", Limits: []core.Limit{core.PerMinute(1)}})
	mine := Adapter{Name: "m", Options: map[string]reflect.Type{"WithHandler": reflect.TypeFor[handler]()}}

	e, err := NewAdapterEngine(mine, l, AdapterOption("m", "WithHandler", func(s int) string { return "literal" }))
	require.NoError(t, err)
	h, err := AdapterOptionValue[handler](e, "WithHandler")
	require.NoError(t, err)
	require.NotNil(t, h, "a function literal of the declared signature is honoured")
	assert.Equal(t, "literal", h(429))
	_, err = AdapterOptionValue[func(int) string](e, "WithHandler")
	assert.EqualError(t, err, "m: option WithHandler holds a httplimit.handler, read as a func(int) string: declare it as reflect.TypeFor[func(int) string]()")

	e, err = NewAdapterEngine(mine, l)
	require.NoError(t, err)
	h, err = AdapterOptionValue[handler](e, "WithHandler")
	assert.NoError(t, err)
	assert.Nil(t, h, "not given")
}

// TestFieldNamesAreTheFormattersOwn: the public names of the header
// fields, and the bound of Fields, are those the formatter writes.
func TestFieldNamesAreTheFormattersOwn(t *testing.T) {
	assert.Equal(t, []string{respond.HeaderLimit, respond.HeaderRemaining, respond.HeaderReset, respond.HeaderRetryAfter,
		respond.HeaderPolicy, respond.HeaderRateLimit},
		[]string{"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset", "Retry-After", "Ratelimit-Policy", "Ratelimit"})
	assert.Equal(t, 8, respond.MaxFields, "Fields.Len's documented bound")
}

// newEngineNamed is the engine of an HTTP adapter named adapter that
// reads no adapter option and reports no outcome.
func newEngineNamed(adapter string, lim *core.Limiter, opts ...Option) (*Engine, error) {
	return NewAdapterEngine(Adapter{Name: adapter}, lim, opts...)
}
