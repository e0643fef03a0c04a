package respond

import (
	"testing"
)

// The helpers of unsafe.go against their safe spelling, each in the
// setting its callers use it: what the one unsafe file buys.

var (
	sinkString string
	sinkBytes  []byte
	sinkBool   bool
	sinkU64    uint64
	sinkBlock  *remBlock
)

func TestUnsafeHelpers(t *testing.T) {
	b := []byte("10.0.0.1:GET:/users/:id")
	s := BytesString(b)
	if s != string(b) || BytesString(nil) != "" {
		t.Fatalf("BytesString = %q", s)
	}
	if StringAddr(s) != StringAddr(s[:3]) || StringAddr(s) == StringAddr(s[1:]) {
		t.Fatal("StringAddr is not the address of the bytes")
	}
	if string(StringBytes("abc")) != "abc" || len(StringBytes("")) != 0 {
		t.Fatal("StringBytes")
	}
	x := "limit"
	y := string([]byte(x))
	if !sameString(x, x) || !sameString(x, y) || sameString(x, "limiT") || sameString(x, "limits") {
		t.Fatal("sameString")
	}
	blk := newRemBlock()
	blk.vals[0] = BytesString(blk.data[:4])
	if blk.vals[0] != "\x00\x00\x00\x00" {
		t.Fatal("newRemBlock is not zeroed")
	}
}

// BytesString: a key built in a buffer, kept as a string (the key
// cache's entries, the intern table's answers, the header blocks).
func BenchmarkBytesString(b *testing.B) {
	buf := []byte("ip:203.0.113.77|GET /users/:id")
	b.Run("unsafe", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			sinkString = BytesString(buf)
		}
	})
	b.Run("copy", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			sinkString = string(buf)
		}
	})
}

// StringBytes: a header value ready-made as a string, returned as the
// bytes a formatter appends (IntText).
func BenchmarkStringBytes(b *testing.B) {
	s := "1234567890"
	b.Run("unsafe", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			sinkBytes = StringBytes(s)
		}
	})
	b.Run("copy", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			sinkBytes = []byte(s)
		}
	})
}

// StringAddr: a route pattern the router hands out every request (the
// same string), hashed by its address against hashing its text.
func BenchmarkStringAddr(b *testing.B) {
	route := "/api/v1/organizations/:org/projects/:project/items/:id"
	b.Run("address", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			sinkU64 = (uint64(StringAddr(route)) ^ uint64(len(route))) * 0x9e3779b97f4a7c15
		}
	})
	b.Run("text", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			h := uint64(14695981039346656037)
			for j := 0; j < len(route); j++ {
				h = (h ^ uint64(route[j])) * 1099511628211
			}
			sinkU64 = h
		}
	})
}

// sameString: the common response's reset value against the cached one,
// the very same string.
func BenchmarkSameString(b *testing.B) {
	x := "1764391234"
	y := x
	b.Run("address", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			sinkBool = sameString(x, y)
		}
	})
	b.Run("compare", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			sinkBool = x == y
		}
	})
}

// newRemBlock: a remaining-count block as pointer-free memory against a
// typed allocation, which the collector must scan.
func BenchmarkRemBlock(b *testing.B) {
	b.Run("noscan", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			blk := newRemBlock()
			blk.vals[0] = BytesString(blk.data[:])
			sinkBlock = blk
		}
	})
	b.Run("typed", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			blk := new(remBlock)
			blk.vals[0] = BytesString(blk.data[:])
			sinkBlock = blk
		}
	})
}
