package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// apSothTopology fails over from us-east to a misspelt region (issue 26,
// item 7: "ap-soth" was accepted silently).
const apSothTopology = `services:
  - name: api
    spillover: {}
    failover:
      - {from: us-east, to: ap-soth}
    endpoints:
      - {address: "127.0.0.1:80", locality: {region: us-east, zone: a, subzone: s}}
      - {address: "127.0.0.2:80", locality: {region: ap-south, zone: b, subzone: s}}
`

// Every command that builds a topology prints its warnings to stderr,
// with the nearest known region, and keeps stdout data clean.
func TestTreeCommandsWarnUnknownRegion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "top.yaml")
	if err := os.WriteFile(path, []byte(apSothTopology), 0o644); err != nil {
		t.Fatal(err)
	}
	want := `warning: ` + path + `: service "api": failover[0].to "ap-soth": no endpoint of the service is in this region, so the rule sends no traffic there; did you mean "ap-south"?`
	out := filepath.Join(t.TempDir(), "tree.bin")
	for _, args := range [][]string{
		{"tree", "build", "-f", path, "--out", out, "-o", "json"},
		{"tree", "validate", "-f", path, "-o", "json"},
		{"tree", "inspect", "-f", path, "-o", "json"},
		{"tree", "pick", "-f", path, "--service", "api", "--from", "region=us-east", "-o", "json"},
	} {
		code, stdout, stderr := runCLI(t, args...)
		if code != 0 || strings.TrimSpace(stderr) != want {
			t.Errorf("%v: exit %d, stderr\n%s\nwant\n%s", args[:2], code, stderr, want)
		}
		if !json.Valid([]byte(stdout)) {
			t.Errorf("%v: stdout is not JSON:\n%s", args[:2], stdout)
		}
	}
}
