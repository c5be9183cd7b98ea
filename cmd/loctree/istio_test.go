package main

import (
	"encoding/json"
	"strings"
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
