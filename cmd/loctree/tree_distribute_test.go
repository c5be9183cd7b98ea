package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInspectShowsDistribute: tree inspect lists a service's distribute
// rules, in text and in JSON.
func TestInspectShowsDistribute(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.json")
	topo := `{"services":[{"name":"d","spillover":{},"distribute":[{"from":"r1/*","to":{"r2":30,"r1/z1":70}}],
		"endpoints":[{"address":"127.0.0.1:80","locality":{"region":"r1","zone":"z1"}}]}]}`
	if err := os.WriteFile(path, []byte(topo), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "tree", "inspect", path)
	if code != 0 || !strings.Contains(out, "distribute from r1/*: r1/z1 70%, r2 30%") {
		t.Fatalf("exit %d, stderr %s; output lacks the distribute rule:\n%s", code, errs, out)
	}
	code, out, errs = runCLI(t, "tree", "inspect", path, "-o", "json")
	var res struct {
		Services []struct {
			Distribute []struct {
				From string            `json:"from"`
				To   map[string]uint32 `json:"to"`
			} `json:"distribute"`
		} `json:"services"`
	}
	if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil || len(res.Services) != 1 || len(res.Services[0].Distribute) != 1 ||
		res.Services[0].Distribute[0].To["r1/z1"] != 70 {
		t.Fatalf("exit %d, stderr %s, %v: %s", code, errs, err, out)
	}
}

// Issue 20, section 6: a failover service whose distribute targets have no
// endpoint has no candidate because of the rule, not of a strict mode it
// does not have: the reason names the rule and its empty targets.
func TestPickDistributeNoCandidateReason(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.json")
	topo := `{"services":[{"name":"d","spillover":{},"distribute":[{"from":"r1/*","to":{"r2":60,"r3":40}}],
		"endpoints":[{"address":"127.0.0.1:80","locality":{"region":"r1","zone":"z1"}}]}]}`
	if err := os.WriteFile(path, []byte(topo), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := runCLI(t, "tree", "pick", "-f", path, "--service", "d", "--from", "region=r1,zone=z1")
	if code != exitNoCandidate || strings.Contains(errs, "strict") ||
		!strings.Contains(errs, "distribute rule 1 (from r1/*) sends the source to r2, r3, which have no eligible endpoint") {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
}
