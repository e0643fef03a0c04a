package exampleapp

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// ExportPath is the example export endpoint: GET ExportPath?ms=N works N
// milliseconds (0..[MaxExportMS]) and answers 200; the default rules'
// exports rule lets each authenticated user run 3 at once.
const (
	ExportPath    = "/v1/export"
	ExportPattern = "GET " + ExportPath
	// MaxExportMS bounds ms: a client cannot park a handler for longer.
	MaxExportMS = 60_000
)

// Export does an export's work for the ms query value: it waits that many
// milliseconds (returning early when ctx ends: the client went away) and
// answers 200 with a JSON body; 400 when ms is not an integer in
// 0..MaxExportMS (an empty ms is 0).
func Export(ctx context.Context, ms string) (int, []byte) {
	n := 0
	if ms != "" {
		var err error
		if n, err = strconv.Atoi(ms); err != nil || n < 0 || n > MaxExportMS || len(ms) > 6 {
			return http.StatusBadRequest, fmt.Appendf(nil, `{"ok":false,"error":"ms must be an integer between 0 and %d"}`+"\n", MaxExportMS)
		}
	}
	t := time.NewTimer(time.Duration(n) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return http.StatusServiceUnavailable, []byte(`{"ok":false,"error":"cancelled"}` + "\n")
	}
	return http.StatusOK, fmt.Appendf(nil, `{"ok":true,"endpoint":%q,"ms":%d}`+"\n", ExportPattern, n)
}

// ExportHandler is [Export] as an http.Handler, for the example servers
// (gin.WrapH, echo.WrapHandler, fiber's adaptor).
func ExportHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code, body := Export(r.Context(), r.URL.Query().Get("ms"))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = w.Write(body)
	})
}
