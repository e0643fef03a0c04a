package nethttp

import (
	"net/http"

	"github.com/limitkit/limitkit/httplimit"
)

// statusWriter records the status a handler writes, for counting by
// outcome (httplimit.WithOutcome). Unwrap lets http.ResponseController
// reach the connection's own writer (Flush, deadlines, hijacking).
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 && code >= 200 {
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

// serveCounted runs next and settles the request's outcome with the
// status it wrote (200 when it wrote nothing, as net/http answers).
func serveCounted(e *httplimit.Engine, res *httplimit.Result, next http.Handler, w http.ResponseWriter, r *http.Request) {
	sw := &statusWriter{ResponseWriter: w}
	next.ServeHTTP(sw, r)
	if sw.status == 0 {
		sw.status = http.StatusOK
	}
	e.Outcome(r.Context(), res, sw.status)
}
