package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// peerModule is a module built with another SDK (AssemblyScript) whose root
// context is registered under "peer" (host/testdata/assemblyscript).
const peerModule = "../../host/testdata/assemblyscript/peer.wasm"

// Issue 20, section 3: wasm run and wasm serve take the plugin's root id
// and vm id, empty by default as in Envoy; a module that registered its
// root context under "peer" runs with --root-id peer, and without it fails
// with a hint (it trapped on the hard-coded "loctree" before).
func TestWasmRunRootID(t *testing.T) {
	code, stdout, stderr := runCLI(t, "wasm", "run", "--cache-dir", cacheDir(), "--module", peerModule,
		"--root-id", "peer", "--vm-id", "vm-1", "--plugin-config", "{}")
	if code != 0 {
		t.Fatalf("--root-id peer: exit %d: %s", code, stderr)
	}
	var out runOutput
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatal(err)
	}
	if headerValue(out.RequestHeaders, "x-peer-root-id") != "peer" || headerValue(out.RequestHeaders, "x-peer-vm-id") != "vm-1" {
		t.Fatalf("the module read other ids: %s", stdout)
	}
	code, stdout, stderr = runCLI(t, "wasm", "run", "--cache-dir", cacheDir(), "--module", peerModule, "--plugin-config", "{}")
	if code != 1 || !strings.Contains(stdout, "Missing root context factory for root id") || !strings.Contains(stderr, "--root-id") {
		t.Fatalf(`root id "": exit %d, stderr %q, stdout %s`, code, stderr, stdout)
	}
}

func TestWasmServeRootID(t *testing.T) {
	url := startServe(t, "--module", peerModule, "--root-id", "peer", "--plugin-config", "{}")
	// The module writes no endpoint header: the proxy's answer says so,
	// which it can only once the plugin started.
	if code, body := proxyGet(t, url, "reviews"); code != http.StatusBadGateway || !strings.Contains(body, "no tree yet") {
		t.Fatalf("status %d: %s", code, body)
	}
}
