package httplimit

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestAnyRouteIndex: a pattern is method-agnostic when registered under
// every method of the set; a pattern registered after the index was
// built rebuilds it once (and the rebuilt routes have a new ID); one the
// router never lists costs one rebuild, then is method-specific; routers
// beyond the slots take turns.
func TestAnyRouteIndex(t *testing.T) {
	type router struct{ regs [][2]string }
	methods := []string{"GET", "POST", "PUT"}
	builds := 0
	build := func(r *router) *AnyRoutes[*router] {
		builds++
		return BuildAnyRoutes(r, methods, func(yield func(m, p string)) {
			for _, reg := range r.regs {
				yield(reg[0], reg[1])
			}
		})
	}
	var x AnyRouteIndex[*router]
	r := &router{regs: [][2]string{{"GET", "/any"}, {"POST", "/any"}, {"PUT", "/any"}, {"GET", "/get"}, {"POST", "/get"}, {"PATCH", "/get"}}}
	assert.True(t, x.AnyMethod(r, "/any", build))
	assert.False(t, x.AnyMethod(r, "/get", build), "PATCH is not one of the set, PUT is missing")
	assert.Equal(t, 1, builds)
	id := x.Routes(r, build).ID()
	assert.NotZero(t, id)
	assert.Equal(t, 1, builds, "Routes returns the routes held")
	r.regs = append(r.regs, [2]string{"PUT", "/get"})
	assert.False(t, x.AnyMethod(r, "/get", build), "known: no rebuild")
	r.regs = append(r.regs, [2]string{"GET", "/late"}, [2]string{"POST", "/late"}, [2]string{"PUT", "/late"})
	assert.True(t, x.AnyMethod(r, "/late", build), "registered later: rebuilt")
	assert.Equal(t, 2, builds)
	assert.NotEqual(t, id, x.Routes(r, build).ID(), "rebuilt routes have a new ID")
	other := &router{regs: r.regs}
	assert.NotEqual(t, x.Routes(r, build).ID(), x.Routes(other, build).ID(), "another router's routes")
	assert.Equal(t, 3, builds)
	assert.False(t, x.AnyMethod(r, "/ghost", build))
	assert.False(t, x.AnyMethod(r, "/ghost", build))
	assert.Equal(t, 4, builds, "an unlisted pattern costs one rebuild")
	for i := 0; i < 20; i++ {
		o := &router{regs: [][2]string{{"GET", "/o"}, {"POST", "/o"}, {"PUT", "/o"}}}
		assert.True(t, x.AnyMethod(o, "/o", build))
	}
	assert.True(t, x.AnyMethod(r, "/any", build), "an evicted router is rebuilt")
}

// TestAnyRouteIndexFacts: the answers remembered per pattern string are
// the owner's (one string asked on two routers answers for each) and
// those of the owner's current routes (a rebuild for another pattern
// renews them); a remembered answer costs no build and no allocation.
func TestAnyRouteIndexFacts(t *testing.T) {
	type router struct{ regs [][2]string }
	builds := 0
	build := func(r *router) *AnyRoutes[*router] {
		builds++
		return BuildAnyRoutes(r, []string{"GET", "POST"}, func(yield func(m, p string)) {
			for _, reg := range r.regs {
				yield(reg[0], reg[1])
			}
		})
	}
	var x AnyRouteIndex[*router]
	both := &router{regs: [][2]string{{"GET", "/p"}, {"POST", "/p"}}}
	getOnly := &router{regs: [][2]string{{"GET", "/p"}}}
	p := "/p"
	for i := 0; i < 3; i++ {
		assert.True(t, x.AnyMethod(both, p, build), "round %d", i)
		assert.False(t, x.AnyMethod(getOnly, p, build), "round %d", i)
	}
	assert.Equal(t, 2, builds)

	r := &router{regs: [][2]string{{"GET", "/q"}}}
	q := "/q"
	assert.False(t, x.AnyMethod(r, q, build))
	assert.False(t, x.AnyMethod(r, q, build))
	assert.Zero(t, testing.AllocsPerRun(10, func() { x.AnyMethod(r, q, build) }))
	r.regs = append(r.regs, [2]string{"POST", "/q"}, [2]string{"GET", "/s"}, [2]string{"POST", "/s"})
	assert.True(t, x.AnyMethod(r, "/s", build), "registered later: rebuilt")
	assert.True(t, x.AnyMethod(r, q, build), "the rebuilt routes answer, not the remembered fact")
}
