package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/loctree/loctree/internal/manifest"
)

// TestIstioRender runs the subcommand and decodes what it prints strictly.
func TestIstioRender(t *testing.T) {
	code, out, errs := runCLI(t, "istio", "render", "--service", "reviews.default", "--port", "9080", "--wasm-url", testWasmURL, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var list struct{ Items []json.RawMessage }
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list.Items) != 4 {
		t.Fatalf("output is not a List of 4 objects (%v):\n%s", err, out)
	}
	for _, it := range list.Items {
		if _, err := manifest.Decode(it); err != nil {
			t.Error(err)
		}
	}
	code, out, _ = runCLI(t, "istio", "render", "--service", "reviews.default", "--port", "9080", "--wasm-url", testWasmURL, "--steering", "persistent-session")
	if code != 0 || !strings.Contains(out, "istio.io/persistent-session-header: x-loctree-session") || strings.Contains(out, "EnvoyFilter") {
		t.Errorf("persistent-session output:\n%s", out)
	}
}

const testWasmURL = "oci://registry.test/loctree/loctree-wasm:1"

func TestIstioRenderErrors(t *testing.T) {
	for _, args := range [][]string{
		{"istio", "render", "--port", "9080", "--wasm-url", testWasmURL},
		{"istio", "render", "--service", "reviews.default", "--port", "9080"}, // --wasm-url is required
		{"istio", "render", "--service", "reviews", "--port", "9080"},
		{"istio", "render", "--service", "reviews.default", "--port", "9080", "-o", "table"},
		{"istio", "render", "--service", "reviews.default", "--port", "9080", "--steering", "sticky"},
	} {
		code, _, errs := runCLI(t, args...)
		if code != 1 || !strings.HasPrefix(errs, "loctree: ") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errs)
		}
	}
}

// TestIstioCheck runs the subcommand against a stand-in agent on 127.0.0.1:
// polled, it reports the requests; never polled, it exits 1 naming the cause.
func TestIstioCheck(t *testing.T) {
	var polls atomic.Int64
	var step atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "loctree_generation 3\nloctree_tree_requests_total{code=\"200\"} %d\n", polls.Add(step.Load()))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	step.Store(2)
	code, out, errs := runCLI(t, "istio", "check", "--agent", srv.URL, "--window", "10ms", "-o", "json")
	if code != 0 || !strings.Contains(out, `"tree_requests": 2`) {
		t.Errorf("polled: exit %d, out %s, err %s", code, out, errs)
	}
	step.Store(0)
	code, _, errs = runCLI(t, "istio", "check", "--agent", srv.URL, "--window", "10ms")
	if code != 1 || !strings.Contains(errs, "no filter polled the agent") {
		t.Errorf("not polled: exit %d, stderr %q", code, errs)
	}
}
