package loader

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/loctree/loctree/shared"
)

// TestTreeFetchesCounted: the metrics count /v1/tree answers by code, so an
// operator sees whether the proxies' filters poll the agent.
func TestTreeFetchesCounted(t *testing.T) {
	m := newMetrics("")
	var trees TreeServer
	h := m.fetches.count(&trees)
	get := func(etag string) int {
		r := httptest.NewRequest(http.MethodGet, "/v1/tree", nil)
		if etag != "" {
			r.Header.Set("If-None-Match", etag)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	get("") // 503: no tree yet
	tree, err := shared.Build(&shared.Topology{Services: []shared.ServiceSpec{{Name: "a", Endpoints: []shared.EndpointSpec{{Address: "127.0.0.1:1"}}}}}, shared.BuildOptions{Generation: 1})
	if err != nil {
		t.Fatal(err)
	}
	trees.Set(tree)
	get("")
	get("")
	if code := get(ETag(tree)); code != http.StatusNotModified {
		t.Fatalf("If-None-Match: %d", code)
	}
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/v1/tree", nil)) // 405
	var buf bytes.Buffer
	m.WriteTo(&buf)
	for _, want := range []string{
		`loctree_tree_requests_total{code="200"} 2`, `loctree_tree_requests_total{code="304"} 1`,
		`loctree_tree_requests_total{code="503"} 1`, `loctree_tree_requests_total{code="other"} 1`,
	} {
		if !strings.Contains(buf.String(), want+"\n") {
			t.Errorf("metrics lack %q:\n%s", want, buf.String())
		}
	}
}

// TestAgentServesTreeFetchCounts: the agent's HTTP endpoints count /v1/tree
// requests (only the HTTP server runs, no kernel).
func TestAgentServesTreeFetchCounts(t *testing.T) {
	addr := freeAddr(t)
	a := &agent{cfg: AgentConfig{Listen: addr}, log: slog.New(slog.DiscardHandler), metrics: newMetrics("")}
	stop, err := a.serve()
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	for range 3 {
		resp, err := http.Get("http://" + addr + "/v1/tree")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if want := `loctree_tree_requests_total{code="503"} 3` + "\n"; !strings.Contains(string(body), want) {
		t.Errorf("/metrics lacks %q:\n%s", want, body)
	}
}
