package respond

import "unsafe"

// This file is the one place on the HTTP side (package httplimit and this
// package) that imports unsafe. Each helper is a conversion or an
// identity the standard library offers only with a copy or a hash; the
// benchmarks beside it (unsafe_test.go) show what each buys against the
// safe spelling. Every caller keeps the rule the helper states: bytes
// turned into a string are never written again, and the bytes of a
// string are never written.

// StringBytes returns s's bytes without copying them. The caller must
// never write them (a string is immutable): for hashing or appending s
// where an API takes []byte.
func StringBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// BytesString returns b as a string without copying it; "" for an empty
// b. The caller must never write b's bytes again (nor let anyone else):
// the string shares them.
func BytesString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// StringAddr is the address of s's bytes: the identity of a string the
// caller keeps alive (Go's collector does not move objects, so while the
// string lives no other string starts at the same address with the same
// length). Equal addresses and lengths mean equal strings; different
// ones say nothing about the text.
func StringAddr(s string) uintptr { return uintptr(unsafe.Pointer(unsafe.StringData(s))) }

// sameString is a == b, true at once for the same string (EpochString's
// result is the cache entry's own): the compare the common response
// makes, without a call when the pointers match.
func sameString(a, b string) bool {
	return len(a) == len(b) && (unsafe.StringData(a) == unsafe.StringData(b) || a == b)
}

// newRemBlock allocates a zeroed remBlock as pointer-free memory: the
// only pointer it ever holds, vals[0]'s, points into its own data, so the
// garbage collector has nothing to trace in it (any pointer to the
// string, or to the slice, keeps the whole block alive, as a pointer
// into an object does) and need not scan it. A pointer-free allocation
// skips the heap bitmap writes and the scanning that a remBlock typed
// allocation pays.
func newRemBlock() *remBlock {
	return (*remBlock)(unsafe.Pointer(new([unsafe.Sizeof(remBlock{})]byte)))
}
