package exampleapp

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/keyfuncs"
	"github.com/limitkit/limitkit/rules"
	"github.com/limitkit/limitkit/rules/serve"
)

// LoginPath is the example login endpoint: POST form fields username and
// password; the password "demo" succeeds (200), anything else fails
// (401). PlansPath is an authenticated endpoint limited by plan.
const (
	LoginPath    = "/login"
	LoginPattern = "POST " + LoginPath
	PlansPath    = "/v1/items"
	PlansPattern = "GET " + PlansPath
	// DemoPassword is the one password the example login accepts.
	DemoPassword = "demo"
)

// Login answers a login attempt: 200 and a JSON body naming the user
// when password is [DemoPassword], 401 otherwise; 400 for an empty
// username, whose password is not checked. The example servers pass as username the identity the
// login rule charged (nethttp.Identity, ginlimit.Identity,
// echolimit.Identity, fiberlimit.Identity), never a username parsed from
// the request again, so that the password is checked for exactly the
// username whose failures are counted: a request whose username the
// rule's key could not read was refused (400, 413 or 415) before the
// handler, and one without a username has no identity (400). A rules
// file whose login rule does not key by form:username gives no identity:
// every login then fails with 400.
func Login(username, password string) (int, []byte) {
	if username == "" {
		return http.StatusBadRequest, []byte(`{"ok":false,"error":"no username"}` + "\n")
	}
	if password == DemoPassword {
		return http.StatusOK, fmt.Appendf(nil, `{"ok":true,"user":%q}`+"\n", username)
	}
	return http.StatusUnauthorized, []byte(`{"ok":false,"error":"invalid username or password"}` + "\n")
}

// TokenWithClaims returns an HS256 token for user sub signed with the
// app's secret, expiring after ttl, with extra claims ({"plan": "pro"}).
func (a *App) TokenWithClaims(sub string, ttl time.Duration, extra map[string]any) (string, error) {
	claims := jwt.MapClaims{"sub": sub, "exp": time.Now().Add(ttl).Unix()}
	for k, v := range extra {
		claims[k] = v
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(a.secret)
}

// Identity is the app's caller resolution for the rules (serve.Identity):
// the client IP, the principal (a verified JWT's sub tagged "user", or a
// listed API key tagged "key"), tiers read from claims of a token verified
// with the app's secret, and overrides written against the principal.
func (a *App) Identity() serve.Identity {
	return serve.Identity{
		IP:   a.IP,
		User: a.Principal,
		Claim: func(name string) (keyfuncs.Func, error) {
			return keyfuncs.JWTClaim(keyfuncs.JWTConfig{Methods: []string{"HS256"}, Key: a.secret, Claim: name})
		},
		Override: a.overrideKey,
	}
}

// overrideKey is the client key that rule r's key function gives the
// client an override names: user:<sub> and key:<API key> for rules keyed
// by user (the principal), key:<API key> for api_key rules, ip:<address>
// for ip rules.
func (a *App) overrideKey(r *rules.Rule, client string) (string, error) {
	kind, v, _ := strings.Cut(client, ":")
	switch {
	case r.Key.Kind == "user" && kind == "user":
		return keyfuncs.Join("user", keyfuncs.Bound(v)), nil
	case r.Key.Kind == "user" && kind == "key":
		k, err := apiKeyOf(v)
		return keyfuncs.Join("key", k), err
	}
	return serve.DefaultOverride(r, client, a.Identity())
}

// watchLimiters is the serve.Config's OnBuild: it exports the
// configured limits of every limiter of rule r (its own, its tiers',
// overrides' and also: checks') to Metrics, and to OTel when it is on.
func (a *App) watchLimiters(_ *rules.Rule, ls rules.Limiters) {
	watch := func(l *core.Limiter) {
		a.Metrics.WatchPolicy(*l.Policy())
		if a.OTel != nil {
			a.OTel.WatchPolicy(*l.Policy())
		}
	}
	watch(ls.Default)
	for _, l := range ls.Tiers {
		watch(l)
	}
	for _, l := range ls.Overrides {
		watch(l)
	}
	for _, l := range ls.Also {
		watch(l)
	}
}

// apiKeyOf is the key keyfuncs.APIKey("X-API-Key", "") (the rules' default
// api_key key function) gives a request presenting key.
func apiKeyOf(key string) (string, error) {
	f, err := keyfuncs.APIKey("X-API-Key", "")
	if err != nil {
		return "", err
	}
	r, err := http.NewRequest(http.MethodGet, "/", nil)
	if err != nil {
		return "", err
	}
	r.Header.Set("X-API-Key", key)
	return f(keyfuncs.FromHTTP(r))
}
