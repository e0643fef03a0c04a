package exampleapp

import (
	"fmt"
	"net/http"
	"net/netip"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/keyfuncs"
	"github.com/limitkit/limitkit/nethttp"
	"github.com/limitkit/limitkit/rules"
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
// when password is [DemoPassword], 401 otherwise.
func Login(username, password string) (int, []byte) {
	if username != "" && password == DemoPassword {
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

// keyFunc is the key function of a rule's key kind (see Options).
func (a *App) keyFunc(k rules.Key) (keyfuncs.Func, error) {
	switch k.Kind {
	case rules.KeyIP:
		return a.IP.Key, nil
	case rules.KeyUser:
		return a.Principal, nil
	case rules.KeyAPIKey:
		return keyfuncs.APIKey("X-API-Key", "")
	case rules.KeyHeader:
		return keyfuncs.Header(k.Header)
	case rules.KeyForm:
		return keyfuncs.FormField(k.Field)
	}
	return nil, fmt.Errorf("unsupported key %s", k)
}

// policyOptions are the options of rule r's tiers, overrides, also:
// checks and counting by outcome, on the limiters ls of its snapshot.
func (a *App) policyOptions(r *rules.Rule, ls rules.Limiters) ([]nethttp.Option, error) {
	var opts []nethttp.Option
	if r.Tier.Kind != rules.TierNone {
		var tier keyfuncs.Func
		var err error
		switch r.Tier.Kind {
		case rules.TierClaim:
			// verified with the app's secret, as the identity is
			tier, err = keyfuncs.JWTClaim(keyfuncs.JWTConfig{Methods: []string{"HS256"}, Key: a.secret, Claim: r.Tier.Name})
		case rules.TierHeader:
			tier, err = keyfuncs.Header(r.Tier.Name)
		}
		if err != nil {
			return nil, err
		}
		opts = append(opts, httplimit.WithTiers(tier, ls.Tiers))
	}
	if len(r.Overrides) > 0 {
		byKey := make(map[string]*core.Limiter, len(r.Overrides))
		for i := range r.Overrides {
			o := &r.Overrides[i]
			k, err := a.overrideKey(r, o)
			if err != nil {
				return nil, err
			}
			byKey[k] = ls.Overrides[o.Client]
		}
		opts = append(opts, httplimit.WithOverrides(byKey))
	}
	for i, c := range r.Also {
		k, err := a.keyFunc(c.Key)
		if err != nil {
			return nil, err
		}
		opts = append(opts, httplimit.WithCheck(ls.Also[i], k))
	}
	if r.Count != nil {
		opts = append(opts, httplimit.WithOutcome(httplimit.Outcome{Count: r.Count.Counts, ResetOnSuccess: r.Count.ResetOnSuccess, ChargeFirst: r.Count.ChargeFirst}))
	}
	return opts, nil
}

// overrideKey is the client key that rule r's key function gives the
// client an override names: user:<sub> and key:<API key> for rules keyed
// by user (the principal), key:<API key> for api_key rules, ip:<address>
// for ip rules.
func (a *App) overrideKey(r *rules.Rule, o *rules.Override) (string, error) {
	kind, v := o.Kind(), o.Value()
	switch {
	case r.Key.Kind == rules.KeyUser && kind == "user":
		return keyfuncs.Join("user", keyfuncs.Bound(v)), nil
	case r.Key.Kind == rules.KeyUser && kind == "key":
		k, err := a.apiKeyOf(v)
		return keyfuncs.Join("key", k), err
	case r.Key.Kind == rules.KeyAPIKey && kind == "key":
		return a.apiKeyOf(v)
	case r.Key.Kind == rules.KeyIP && kind == "ip":
		addr, err := netip.ParseAddr(v)
		if err != nil {
			return "", fmt.Errorf("override %q: %w", o.Client, err)
		}
		return a.IP.Key(peerRequest(netip.AddrPortFrom(addr, 1).String()))
	}
	return "", fmt.Errorf("override %q cannot match rule %q, keyed by %s (user rules take user: and key:, api_key rules key:, ip rules ip:)", o.Client, r.Name, r.Key)
}

// apiKeyOf is the key keyfuncs.APIKey gives a request presenting key.
func (a *App) apiKeyOf(key string) (string, error) {
	f, err := keyfuncs.APIKey("X-API-Key", "")
	if err != nil {
		return "", err
	}
	r, _ := http.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("X-API-Key", key)
	return f(keyfuncs.FromHTTP(r))
}

func peerRequest(addr string) keyfuncs.Request {
	r, _ := http.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = addr
	return keyfuncs.FromHTTP(r)
}
