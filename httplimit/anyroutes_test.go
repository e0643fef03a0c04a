package httplimit

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestAnyRoutes: a pattern is method-agnostic when registered under
// every method of the set; a pattern registered after the index was
// built rebuilds it once (and the rebuilt routes have a new Table); one the
// router never lists costs one rebuild, then is method-specific; routers
// beyond the slots take turns.
func TestAnyRoutes(t *testing.T) {
	type router struct{ regs [][2]string }
	methods := []string{"GET", "POST", "PUT"}
	builds := 0
	x := NewAnyRoutes(methods, func(r *router, yield func(m, p string)) {
		builds++
		for _, reg := range r.regs {
			yield(reg[0], reg[1])
		}
	})
	r := &router{regs: [][2]string{{"GET", "/any"}, {"POST", "/any"}, {"PUT", "/any"}, {"GET", "/get"}, {"POST", "/get"}, {"PATCH", "/get"}}}
	assert.True(t, x.AnyMethod(r, "/any"))
	assert.False(t, x.AnyMethod(r, "/get"), "PATCH is not one of the set, PUT is missing")
	assert.Equal(t, 1, builds)
	id := x.Table(r)
	assert.NotZero(t, id)
	assert.Equal(t, 1, builds, "Table names the routes held")
	r.regs = append(r.regs, [2]string{"PUT", "/get"})
	assert.False(t, x.AnyMethod(r, "/get"), "known: no rebuild")
	r.regs = append(r.regs, [2]string{"GET", "/late"}, [2]string{"POST", "/late"}, [2]string{"PUT", "/late"})
	assert.True(t, x.AnyMethod(r, "/late"), "registered later: rebuilt")
	assert.Equal(t, 2, builds)
	assert.NotEqual(t, id, x.Table(r), "rebuilt routes have a new Table")
	other := &router{regs: r.regs}
	assert.NotEqual(t, x.Table(r), x.Table(other), "another router's routes")
	assert.Equal(t, 3, builds)
	assert.False(t, x.AnyMethod(r, "/ghost"))
	assert.False(t, x.AnyMethod(r, "/ghost"))
	assert.Equal(t, 4, builds, "an unlisted pattern costs one rebuild")
	for i := 0; i < 20; i++ {
		o := &router{regs: [][2]string{{"GET", "/o"}, {"POST", "/o"}, {"PUT", "/o"}}}
		assert.True(t, x.AnyMethod(o, "/o"))
	}
	assert.True(t, x.AnyMethod(r, "/any"), "an evicted router is rebuilt")
}

// TestAnyRoutesFacts: the answers remembered per pattern string are
// the owner's (one string asked on two routers answers for each) and
// those of the owner's current routes (a rebuild for another pattern
// renews them); a remembered answer costs no build and no allocation.
func TestAnyRoutesFacts(t *testing.T) {
	type router struct{ regs [][2]string }
	builds := 0
	x := NewAnyRoutes([]string{"GET", "POST"}, func(r *router, yield func(m, p string)) {
		builds++
		for _, reg := range r.regs {
			yield(reg[0], reg[1])
		}
	})
	both := &router{regs: [][2]string{{"GET", "/p"}, {"POST", "/p"}}}
	getOnly := &router{regs: [][2]string{{"GET", "/p"}}}
	p := "/p"
	for i := 0; i < 3; i++ {
		assert.True(t, x.AnyMethod(both, p), "round %d", i)
		assert.False(t, x.AnyMethod(getOnly, p), "round %d", i)
	}
	assert.Equal(t, 2, builds)

	r := &router{regs: [][2]string{{"GET", "/q"}}}
	q := "/q"
	assert.False(t, x.AnyMethod(r, q))
	assert.False(t, x.AnyMethod(r, q))
	assert.Zero(t, testing.AllocsPerRun(10, func() { x.AnyMethod(r, q) }))
	r.regs = append(r.regs, [2]string{"POST", "/q"}, [2]string{"GET", "/s"}, [2]string{"POST", "/s"})
	assert.True(t, x.AnyMethod(r, "/s"), "registered later: rebuilt")
	assert.True(t, x.AnyMethod(r, q), "the rebuilt routes answer, not the remembered fact")
}
