package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loctree/loctree/shared"
)

// runCLI runs the loctree command line in-process.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestPickJSON(t *testing.T) {
	code, out, errs := runCLI(t, "tree", "pick", "--service", "reviews", "--from", "region=us-east,zone=us-east-1a,subzone=rack-1", "--count", "2000", "--seed", "3", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var res map[string]any
	dec := json.NewDecoder(strings.NewReader(out))
	if err := dec.Decode(&res); err != nil {
		t.Fatal(err)
	}
	if dec.More() {
		t.Fatal("more than one JSON object")
	}
	if res["service"] != "reviews.default.svc.cluster.local" || res["mode"] != "failover" || res["matched"] != 3.0 {
		t.Fatalf("result %v", res)
	}
	cands := res["candidates"].([]any)
	picks := res["picks"].(map[string]any)
	total := 0.0
	for addr, n := range picks {
		found := false
		for _, c := range cands {
			found = found || c == addr
		}
		if !found {
			t.Fatalf("picked %s outside the candidates %v", addr, cands)
		}
		total += n.(float64)
	}
	if len(cands) != 2 || total != 2000 || len(picks) != 2 {
		t.Fatalf("candidates %v picks %v", cands, picks)
	}
}

func TestPickStrictNoCandidate(t *testing.T) {
	code, out, errs := runCLI(t, "tree", "pick", "--service", "payments", "--from", "region=eu-central,zone=eu-central-1a", "-o", "json")
	if code != exitNoCandidate {
		t.Fatalf("exit %d, want %d", code, exitNoCandidate)
	}
	var res pickResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res.Candidates == nil || len(res.Candidates) != 0 || res.Error == "" || res.Matched != 1 || !strings.Contains(out, `"candidates": []`) {
		t.Fatalf("result %+v", res)
	}
	if !strings.Contains(errs, "strict") || strings.Count(errs, "\n") != 1 {
		t.Fatalf("stderr %q, want one line naming strict mode", errs)
	}
}

func TestPickConsistentKey(t *testing.T) {
	code, out, _ := runCLI(t, "tree", "pick", "--service", "payments", "--from", "region=us-east,zone=us-east-1a", "--key", "user-42", "--count", "50", "-o", "json")
	var res pickResult
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil {
		t.Fatalf("exit %d: %s", code, out)
	}
	if len(res.Candidates) != 3 || len(res.Picks) != 1 {
		t.Fatalf("consistent hash with one key spread over %v", res.Picks)
	}
}

func TestPickTable(t *testing.T) {
	code, out, _ := runCLI(t, "tree", "pick", "--service", "reviews", "--node", "node-d", "--count", "10")
	if code != 0 || !strings.Contains(out, "matched 2 of 3 scopes: 1 candidate") || !strings.Contains(out, "127.0.2.5:9080") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

func TestBadInputsFailWithOneLine(t *testing.T) {
	dir := t.TempDir()
	badYAML := filepath.Join(dir, "bad.yaml")
	os.WriteFile(badYAML, []byte("services:\n- name: a\n  endpoints:\n  - adress: 127.0.0.1:80\n"), 0o600)
	badTree := filepath.Join(dir, "bad.bin")
	os.WriteFile(badTree, []byte("LTRE not a tree"), 0o600)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"tree", "pick", "-f", filepath.Join(dir, "missing.yaml"), "--service", "a"}, "missing.yaml"},
		{[]string{"tree", "pick", "-f", badYAML, "--service", "a"}, "line 4: unknown key adress (did you mean address?)"},
		{[]string{"tree", "pick", "--service", "nope"}, `unknown service "nope"`},
		{[]string{"tree", "pick", "--service", "reviews", "--from", "region"}, "bad --from"},
		{[]string{"tree", "pick", "--service", "reviews", "--from", "zone=a,zone=b"}, `scope "zone" given twice`},
		{[]string{"tree", "pick", "--service", "reviews", "--from", "regoin=x"}, `"regoin" is not a scope`},
		{[]string{"tree", "pick", "--service", "reviews", "--node", "node-zz"}, `unknown node "node-zz"`},
		{[]string{"tree", "pick", "--service", "reviews", "-o", "xml"}, `unknown output format "xml"`},
		{[]string{"tree", "pick"}, `"service" not set`},
		{[]string{"tree", "inspect", badTree}, "corrupt tree"},
		{[]string{"tree", "build"}, `"out" not set`},
		{[]string{"tree", "build", "-o", "tree.bin"}, `-o is the output format (text, json or yaml); write the tree with --out tree.bin`},
	}
	for _, c := range cases {
		code, _, errs := runCLI(t, c.args...)
		if code != 1 || !strings.Contains(errs, c.want) || strings.Count(errs, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want 1 and one line with %q", c.args, code, errs, c.want)
		}
	}
}

func TestBuildInspectJSON(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tree.bin")
	if code, _, errs := runCLI(t, "tree", "build", "--out", path, "--generation", "9"); code != 0 {
		t.Fatal(errs)
	}
	b, _ := os.ReadFile(path)
	tree, err := shared.Decode(b)
	if err != nil || tree.Generation() != 9 {
		t.Fatalf("built tree: %v", err)
	}
	code, out, errs := runCLI(t, "tree", "inspect", path, "-o", "json")
	if code != 0 {
		t.Fatal(errs)
	}
	var got jsonTree
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if got.Generation != 9 || len(got.Services) != tree.NumServices() {
		t.Fatalf("inspect: %+v", got)
	}
	for _, s := range got.Services {
		if sum := sumLeaves(s.Tree); sum != s.Eligible || s.Tree.Endpoints != s.Eligible || s.Endpoints != s.Eligible+len(s.Ineligible) {
			t.Errorf("%s: leaves hold %d endpoints, root %d, eligible %d", s.Name, sum, s.Tree.Endpoints, s.Eligible)
		}
	}
	code, out, _ = runCLI(t, "tree", "inspect", path)
	if code != 0 || !strings.Contains(out, "└─ ") || !strings.Contains(out, "not eligible: 127.0.2.4:9080") {
		t.Fatalf("table inspect:\n%s", out)
	}
}

func sumLeaves(n jsonNode) int {
	if len(n.Children) == 0 {
		return len(n.Addresses)
	}
	s := 0
	for _, c := range n.Children {
		s += sumLeaves(c)
	}
	return s
}

// TestPickLoads: for a spillover service, tree pick shows Envoy's
// per-priority loads (the "loads" field of -o json, a line per priority in
// the table) and picks by them.
func TestPickLoads(t *testing.T) {
	top := filepath.Join(t.TempDir(), "spill.yaml")
	doc := `services:
  - name: reviews
    scopes: [region, zone]
    spillover: {overprovisioning_factor: 140, panic_threshold: 50}
    failover: [{from: us-east, to: eu-west}]
    endpoints:
      - {address: 127.0.0.1:80, locality: {region: us-east, zone: a}}
      - {address: 127.0.0.2:80, locality: {region: us-east, zone: a}, healthy: false}
      - {address: 127.0.0.3:80, locality: {region: us-east, zone: b}}
      - {address: 127.0.0.4:80, locality: {region: eu-west, zone: c}}
      - {address: 127.0.0.5:80, locality: {region: ap-south, zone: c}}
`
	if err := os.WriteFile(top, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "tree", "pick", "-f", top, "--service", "reviews", "--from", "region=us-east,zone=a", "--count", "2000", "--seed", "1", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var res struct {
		Loads []struct {
			Priority, Matched, Healthy, Degraded, Total int
			HealthyLoad                                 int    `json:"healthy_load"`
			DegradedLoad                                int    `json:"degraded_load"`
			Failover                                    string `json:"failover"`
			Panic                                       bool   `json:"panic"`
		} `json:"loads"`
		Picks map[string]int `json:"picks"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// zone a: 1 healthy of 2 → health 70; zone b (rest of us-east): 100.
	if len(res.Loads) != 4 || res.Loads[0].HealthyLoad != 70 || res.Loads[1].HealthyLoad != 30 || res.Loads[2].Failover != "to" || res.Loads[3].Failover != "other" {
		t.Fatalf("loads %+v", res.Loads)
	}
	if n := res.Picks["127.0.0.1:80"]; n < 1300 || n > 1500 || res.Picks["127.0.0.2:80"] != 0 {
		t.Fatalf("picks %v, want about 70 %% on 127.0.0.1:80 and none on the unhealthy one", res.Picks)
	}
	code, out, _ = runCLI(t, "tree", "pick", "-f", top, "--service", "reviews", "--from", "region=us-east,zone=a", "--count", "10")
	if code != 0 || !strings.Contains(out, "P0  matched 2 of 2") || !strings.Contains(out, "P2  matched 0 of 2 (failover to)") {
		t.Fatalf("table:\n%s", out)
	}
}

// TestPickDistribute: for a service with distribute rules, tree pick shows
// the rule and its targets' shares (-o json "distribute", a line per target
// in the table) and picks by them. Worked by hand from docs/FORMAT.md
// ("Distribute"): us-east/a has 2 healthy endpoints, effective weight 80;
// eu-west 1 healthy of 2, 20 · min(1, 1.4 · 1/2) = 14; us-east/b no target.
func TestPickDistribute(t *testing.T) {
	top := filepath.Join(t.TempDir(), "dist.yaml")
	doc := `services:
  - name: reviews
    scopes: [region, zone]
    spillover: {}
    distribute:
      - from: us-east/*
        to: {us-east/a: 80, eu-west: 20}
    endpoints:
      - {address: 127.0.0.1:80, locality: {region: us-east, zone: a}}
      - {address: 127.0.0.2:80, locality: {region: us-east, zone: a}}
      - {address: 127.0.0.3:80, locality: {region: us-east, zone: b}}
      - {address: 127.0.0.4:80, locality: {region: eu-west, zone: c}}
      - {address: 127.0.0.5:80, locality: {region: eu-west, zone: c}, healthy: false}
`
	if err := os.WriteFile(top, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "tree", "pick", "-f", top, "--service", "reviews", "--from", "region=us-east,zone=b", "--count", "4000", "--seed", "1", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var res struct {
		Distribute struct {
			Rule    int `json:"rule"`
			Targets []struct {
				To                     string `json:"to"`
				Weight, Healthy, Total int
				Share                  float64 `json:"share"`
			} `json:"targets"`
		} `json:"distribute"`
		Picks map[string]int `json:"picks"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	d := res.Distribute
	if d.Rule != 1 || len(d.Targets) != 2 || d.Targets[0].To != "eu-west" || d.Targets[0].Share != 14.89 || d.Targets[1].Share != 85.11 {
		t.Fatalf("distribute %+v, want rule 1, eu-west 14.89 %%, us-east/a 85.11 %%", d)
	}
	if n := res.Picks["127.0.0.4:80"]; n < 480 || n > 720 || res.Picks["127.0.0.3:80"] != 0 || res.Picks["127.0.0.5:80"] != 0 {
		t.Fatalf("picks %v, want about 14.9 %% on 127.0.0.4:80 and none on .3 (no target) and .5 (unhealthy)", res.Picks)
	}
	code, out, _ = runCLI(t, "tree", "pick", "-f", top, "--service", "reviews", "--from", "region=us-east,zone=b", "--count", "10")
	if code != 0 || !strings.Contains(out, "P0  the distribute targets: 3 healthy, 0 degraded of 4") || !strings.Contains(out, "distribute rule 1:") || !strings.Contains(out, "to eu-west") {
		t.Fatalf("table:\n%s", out)
	}
}

// TestTreePickFailoverLimit: a source beyond a service's failover_limit has
// no candidate; pick exits with exitNoCandidate and says the limit is why
// (not strict mode), and a source within the limit still fails over.
func TestTreePickFailoverLimit(t *testing.T) {
	top := filepath.Join(t.TempDir(), "limit.yaml")
	yaml := "services:\n  - name: r\n    scopes: [region, zone]\n    failover_limit: region\n    endpoints:\n" +
		"      - {address: 127.0.0.1:9080, locality: {region: r1, zone: a}}\n"
	if err := os.WriteFile(top, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errs := runCLI(t, "tree", "pick", "-f", top, "--service", "r", "--from", "region=r2,zone=a")
	if code != exitNoCandidate || !strings.Contains(errs, "failover_limit region") || strings.Contains(errs, "strict") {
		t.Fatalf("exit %d, stderr %q: want %d naming failover_limit region", code, errs, exitNoCandidate)
	}
	if code, out, errs := runCLI(t, "tree", "pick", "-f", top, "--service", "r", "--from", "region=r1,zone=b"); code != 0 || !strings.Contains(out, "127.0.0.1:9080") {
		t.Fatalf("within the limit: exit %d, %s %s", code, out, errs)
	}
}
