package nethttp

import (
	"net/http"

	"github.com/limitkit/limitkit/httplimit"
)

// statusWriter records the status a handler writes, for counting by
// outcome (httplimit.WithOutcome): the first final status written (200
// or more, or 101 Switching Protocols, after which net/http sends no
// other; not another 1xx), or 200 once a body or a Flush went out first;
// 0 while nothing was (a connection hijacked without a status included). Unwrap lets http.ResponseController
// reach the connection's own writer (Flush, deadlines, hijacking).
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Flush forwards to the underlying writer when it can flush.
func (s *statusWriter) Flush() {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// serveCounted runs next and settles the request's outcome: the status
// it wrote (Flush before any status is 200, as net/http sends),
// httplimit.OutcomeUnwritten when it wrote none, httplimit.OutcomePanic
// when it panicked (the panic goes on unchanged; the charge is made on
// the way out), and the engine makes a request whose context has ended a
// counted failure.
func serveCounted(e *httplimit.Engine, res *httplimit.Result, next http.Handler, w http.ResponseWriter, r *http.Request) {
	sw := &statusWriter{ResponseWriter: w}
	done := false
	defer func() {
		if !done {
			e.Outcome(r.Context(), res, httplimit.OutcomePanic)
		}
	}()
	next.ServeHTTP(sw, r)
	done = true
	if sw.status == 0 {
		sw.status = httplimit.OutcomeUnwritten
	}
	e.Outcome(r.Context(), res, sw.status)
}
