package keyfuncs

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Join encodes parts into one string such that different part lists never
// give the same string: each part is written as its length in decimal, ':',
// the part and ',' (a netstring), so Join("a:b", "c") = "3:a:b,1:c," and
// Join("a", "b:c") = "1:a,3:b:c," differ. Use it wherever several values
// make one key; it adds no length bound of its own (pass untrusted parts
// through [Bound] first; key functions in this package already do).
func Join(parts ...string) string {
	n := 0
	for _, p := range parts {
		n += len(p) + 2 + decimalLen(len(p))
	}
	var b strings.Builder
	b.Grow(n)
	var num [20]byte
	for _, p := range parts {
		b.Write(strconv.AppendInt(num[:0], int64(len(p)), 10))
		b.WriteByte(':')
		b.WriteString(p)
		b.WriteByte(',')
	}
	return b.String()
}

func decimalLen(n int) int {
	d := 1
	for n >= 10 {
		n /= 10
		d++
	}
	return d
}

// Tagged namespaces fn's keys under tag: the key is Join(tag, key). Give
// every alternative of [FirstOf] its own tag, so that a user named
// "203.0.113.7" and the client at 203.0.113.7 never share a quota. Errors
// from fn pass through unchanged.
func Tagged(tag string, fn Func) Func {
	fn = orNil(fn)
	return func(r Request) (string, error) {
		k, err := fn(r)
		if err != nil {
			return "", err
		}
		return Join(tag, k), nil
	}
}

// FirstOf returns the key of the first fn that yields one. A fn that fails,
// whether with [ErrNoKey] or because its material is invalid (an expired or
// forged token), is skipped, so a request with a bad token is keyed by the
// next function rather than by what the token claims; a [Refusal] (the
// request carries an identity the fn cannot read as the handler would) is
// returned at once, never replaced by a weaker key. If every fn fails, the
// result is the first error that is not ErrNoKey, else an error wrapping
// ErrNoKey.
//
// FirstOf returns keys verbatim: wrap each fn in [Tagged] so that keys
// from different functions cannot collide. The design notes' hybrid key
// for login and mixed endpoints is
//
//	FirstOf(Tagged("user", user), Tagged("ip", ip))
//
// with a [JWTClaim], [ClaimFromContext] or [ContextValue] as user and a
// [Resolver]'s Key as ip.
//
// Safe for: the hybrid "the user if authenticated, else the IP". A client
// can pick which function keys it by sending a token or not, so give the
// fallback (anonymous) policy the stricter limit.
func FirstOf(fns ...Func) Func {
	fns = append([]Func(nil), fns...)
	for i, fn := range fns {
		fns[i] = orNil(fn)
	}
	return func(r Request) (string, error) {
		var firstErr error
		for _, fn := range fns {
			k, err := fn(r)
			if err == nil {
				return k, nil
			}
			if refused(err) {
				return "", err // never keyed by a weaker function
			}
			if firstErr == nil && !errors.Is(err, ErrNoKey) {
				firstErr = err
			}
		}
		if firstErr != nil {
			return "", firstErr
		}
		return "", errNoneOf
	}
}

var errNoneOf = fmt.Errorf("%w: no key function yielded a key", ErrNoKey)

// errNilFunc is returned, on every request, by a combinator that was given a
// nil [Func]: a wiring mistake that must not panic on the request path.
var errNilFunc = errors.New("keyfuncs: nil key function passed to a combinator")

func orNil(fn Func) Func {
	if fn == nil {
		return func(Request) (string, error) { return "", errNilFunc }
	}
	return fn
}
