package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInspectShowsSessionAffinity: tree inspect names a service's session
// affinity timeout, in text and in JSON.
func TestInspectShowsSessionAffinity(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.json")
	topo := `{"services":[{"name":"sticky","vip":"127.77.0.9:80","policy":"consistent_hash","session_affinity":{"timeout_seconds":2},
		"endpoints":[{"address":"127.0.0.1:80"}]}]}`
	if err := os.WriteFile(path, []byte(topo), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "tree", "inspect", path)
	if code != 0 || !strings.Contains(out, "session affinity 2 s") {
		t.Fatalf("exit %d, stderr %s; output lacks the session affinity:\n%s", code, errs, out)
	}
	code, out, errs = runCLI(t, "tree", "inspect", path, "-o", "json")
	var res struct {
		Services []struct {
			AffinityTimeout uint32 `json:"session_affinity_timeout_seconds"`
		} `json:"services"`
	}
	if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil || len(res.Services) != 1 || res.Services[0].AffinityTimeout != 2 {
		t.Fatalf("exit %d, stderr %s, %v: %s", code, errs, err, out)
	}
}
