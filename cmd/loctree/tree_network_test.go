package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const networkTopologyYAML = `services:
  - name: net
    scopes: [network, region]
    endpoints:
      - {address: 127.0.50.1:9050, locality: {network: net-b, region: us-east}}
      - {address: 127.0.50.2:9050, locality: {network: net-c, region: us-west}}
      - {address: 127.0.50.4:9050, locality: {network: net-d, region: us-east}}
`

// TestPickNetworkRule: tree pick shows ztunnel's network rule (istio/ztunnel
// src/state.rs load_balance at 62d82653, lines 463-489): from net-a, which
// has no endpoint, the candidates are the us-east endpoints of the other
// networks; the JSON says cross_network, the table says why, with each
// candidate's locality.
func TestPickNetworkRule(t *testing.T) {
	file := filepath.Join(t.TempDir(), "net.yaml")
	if err := os.WriteFile(file, []byte(networkTopologyYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "tree", "pick", "-f", file, "--service", "net", "--from", "network=net-a,region=us-east", "--count", "100", "--seed", "1", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var res pickResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	slices.Sort(res.Candidates)
	if !res.CrossNetwork || res.Matched != 1 || !slices.Equal(res.Candidates, []string{"127.0.50.1:9050", "127.0.50.4:9050"}) {
		t.Fatalf("result %+v, want cross_network, 1 scope matched after network, the two us-east endpoints", res)
	}
	code, out, errs = runCLI(t, "tree", "pick", "-f", file, "--service", "net", "--from", "network=net-a,region=us-east", "--count", "10", "--seed", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{`no eligible endpoint is on network "net-a"`, "network rule", "matched 1 of the 1 scope after network", "net-d/us-east"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

// TestInspectNetworkRule: tree build counts a service's endpoints, not the
// network rule's copies, and tree inspect names the rule.
func TestInspectNetworkRule(t *testing.T) {
	dir := t.TempDir()
	file, out := filepath.Join(dir, "net.yaml"), filepath.Join(dir, "net.bin")
	if err := os.WriteFile(file, []byte(networkTopologyYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, errs := runCLI(t, "tree", "build", "-f", file, "--out", out)
	if code != 0 || !strings.Contains(stdout, " 3 endpoints (3 eligible),") {
		t.Fatalf("exit %d: %s%s, want 3 endpoints", code, stdout, errs)
	}
	code, stdout, errs = runCLI(t, "tree", "inspect", out, "-o", "json")
	if code != 0 || !strings.Contains(stdout, `"network_rule": "ztunnel"`) {
		t.Fatalf("exit %d: %s%s, want network_rule ztunnel", code, stdout, errs)
	}
}
