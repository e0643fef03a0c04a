package ginlimit_test

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/ginlimit"
	"github.com/limitkit/limitkit/httplimit"
)

// A handler that hijacks the connection without a status (a websocket
// library writing its own 101, a tunnel) has written nothing gin knows
// of: gin reads it as its default 200, but the limiter cannot tell how
// it ended, so it is a counted failure (httplimit.OutcomeUnwritten), as
// on net/http and echo, never a success that ResetOnSuccess turns into
// a reset. Two failed logins (401) then hijacks: every hijack is
// charged, so the count is never reset and the client stays denied.
func TestOutcomeHijackWithoutStatusIsACountedFailure(t *testing.T) {
	gin.SetMode(gin.TestMode)
	ms := memstore.MustNew()
	t.Cleanup(func() { _ = ms.Close() })
	l := core.MustNewLimiter(ms, core.Policy{Name: "login", Limits: []core.Limit{core.PerMinute(3)}})
	mw, err := ginlimit.NewMiddleware(l, httplimit.WithOutcome(httplimit.Outcome{Count: httplimit.StatusIn(401), ResetOnSuccess: true}))
	require.NoError(t, err)
	r := gin.New()
	// served is told when a request's whole chain, the limiter's charge
	// after the handler included, has returned: a hijacking handler's
	// client has its answer before that, so the next request waits for it
	// (otherwise it could peek before the hijack was charged).
	served := make(chan struct{}, 1)
	r.Use(func(c *gin.Context) { c.Next(); served <- struct{}{} })
	r.Use(mw)
	r.POST("/login", func(c *gin.Context) {
		if c.Query("fail") != "" {
			c.Status(http.StatusUnauthorized)
			return
		}
		conn, brw, err := c.Writer.Hijack()
		if err != nil {
			return
		}
		_, _ = brw.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
		_ = brw.Flush()
		_ = conn.Close()
	})
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	post := func(q string) int {
		resp, err := srv.Client().Post(srv.URL+"/login"+q, "text/plain", nil)
		require.NoError(t, err)
		_, _ = bufio.NewReader(resp.Body).ReadString(0)
		_ = resp.Body.Close()
		<-served
		return resp.StatusCode
	}
	require.Equal(t, 401, post("?fail=1"))
	require.Equal(t, 401, post("?fail=1"))
	require.Equal(t, 200, post(""), "the hijack is admitted (one left)")
	assert.Equal(t, http.StatusTooManyRequests, post(""), "the hijack was charged, not a success that reset the count")
}
