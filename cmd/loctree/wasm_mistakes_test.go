package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/loctree/loctree/internal/testing/wasmtest"
)

// Issue 14, section 3: `wasm run` with an :authority that names no service
// of the tree says so in its logs, instead of an untouched request alone.
func TestWasmRunUnknownAuthority(t *testing.T) {
	mod := wasmtest.Build(t, "../../filter")
	code, stdout, stderr := runCLI(t, "wasm", "run", "--cache-dir", cacheDir(), "--module", mod, "--plugin-config", cliTopology,
		"--header", ":authority=reveiws:9080")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var out runOutput
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, l := range out.Logs {
		found = found || strings.Contains(l.Message, `no service of the tree matches :authority "reveiws:9080"`) && strings.Contains(l.Message, "reviews")
	}
	if !found {
		t.Fatalf("no log says the authority matched no service: %s", stdout)
	}
	// a known service: no such line
	code, stdout, _ = runCLI(t, "wasm", "run", "--cache-dir", cacheDir(), "--module", mod, "--plugin-config", cliTopology,
		"--header", ":authority=reviews:9080")
	if code != 0 || strings.Contains(stdout, "no service of the tree") {
		t.Fatalf("exit %d: %s", code, stdout)
	}
}

// `wasm serve` tells "no tree yet" from "unknown host" in its 502.
func TestWasmServeNoTreeVsUnknownHost(t *testing.T) {
	mod := wasmtest.Build(t, "../../filter")
	noTree := startServe(t, "--module", mod, "--plugin-config", `{"tree":{"cluster":"agent","refresh_ms":60000}}`, "--upstream", "agent=127.0.0.1:1")
	if code, body := proxyGet(t, noTree, "reviews:9080"); code != 502 || !strings.Contains(body, "no tree yet") {
		t.Errorf("without a tree: %d %q", code, body)
	}
	withTree := startServe(t, "--module", mod, "--plugin-config", cliTopology)
	if code, body := proxyGet(t, withTree, "reveiws:9080"); code != 502 || !strings.Contains(body, `unknown host "reveiws:9080"`) || !strings.Contains(body, "reviews") {
		t.Errorf("unknown host: %d %q", code, body)
	}
}

// Issue 14, section 4: one meaning per flag name. --header is a request
// header (wasm run); the header serve reads the endpoint from is
// --endpoint-header, and serve's old --header still works, deprecated.
func TestWasmServeEndpointHeaderFlag(t *testing.T) {
	serve, _, err := newRootCmd().Find([]string{"wasm", "serve"})
	if err != nil {
		t.Fatal(err)
	}
	f := serve.Flags().Lookup("endpoint-header")
	if f == nil || f.DefValue != "x-gateway-destination-endpoint" {
		t.Fatalf("wasm serve has no --endpoint-header: %v", f)
	}
	if old := serve.Flags().Lookup("header"); old == nil || old.Deprecated == "" {
		t.Fatalf("wasm serve --header: %v, want it kept and deprecated", old)
	}
}
