package loader

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestSourceHealth: a source that reports its health (source.Health) shows
// in /metrics as loctree_source_up and, while failing, in /healthz's
// detail, which stays 200: the agent serves its last tree meanwhile.
func TestSourceHealth(t *testing.T) {
	var failure error
	a := &agent{metrics: newMetrics("")}
	a.metrics.source = func() error { return failure }
	a.ready.Store(true)
	a.pinsOK.Store(true)
	for _, tt := range []struct {
		err        error
		up, detail string
	}{
		{nil, "loctree_source_up 1\n", "ok\n"},
		{errors.New("kubernetes nodes failing for 3s: connection refused"), "loctree_source_up 0\n",
			"ok\nsource: kubernetes nodes failing for 3s: connection refused; serving the last tree\n"},
	} {
		failure = tt.err
		var buf bytes.Buffer
		if _, err := a.metrics.WriteTo(&buf); err != nil || !strings.Contains(buf.String(), tt.up) {
			t.Errorf("with %v, /metrics lacks %q (%v)", tt.err, tt.up, err)
		}
		rec := httptest.NewRecorder()
		a.healthz(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		if rec.Code != http.StatusOK || rec.Body.String() != tt.detail {
			t.Errorf("with %v, /healthz = %d %q, want 200 %q", tt.err, rec.Code, rec.Body.String(), tt.detail)
		}
	}
}
