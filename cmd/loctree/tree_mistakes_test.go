package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 14, section 3: a --from that matches less than the user meant says
// why, instead of "matched 0 of 3 scopes" and exit 0 alone.
func TestPickExplainsMismatch(t *testing.T) {
	cases := []struct {
		name, from string
		stdout     []string
		stderr     string
	}{
		{"typo", "region=us-wst,zone=us-west-2a", []string{`"us-wst" is not a region of any eligible endpoint of reviews.default.svc.cluster.local (nearest: us-west, us-east`, "zone=us-west-2a is not used"}, `warning: "us-wst" is not a region`},
		{"no region", "zone=us-east-1a", []string{"--from gives no region", "zone=us-east-1a is not used"}, ""},
		{"no from", "", []string{"no --from or --node: the source locality is empty"}, ""},
		{"unhealthy", "region=us-west,zone=us-west-2a,subzone=rack-1", []string{"no eligible endpoint has subzone=rack-1 under region=us-west, zone=us-west-2a: 127.0.2.4:9080 is unhealthy"}, ""},
		{"elsewhere", "region=us-east,zone=us-west-2a", []string{"no eligible endpoint has zone=us-west-2a under region=us-east (there: us-east-1a, us-east-1b)"}, ""},
	}
	for _, c := range cases {
		args := []string{"tree", "pick", "--service", "reviews", "--count", "10"}
		if c.from != "" {
			args = append(args, "--from", c.from)
		}
		code, out, errs := runCLI(t, args...)
		if code != 0 {
			t.Errorf("%s: exit %d: %s", c.name, code, errs)
		}
		for _, want := range c.stdout {
			if !strings.Contains(out, want) {
				t.Errorf("%s: output lacks %q:\n%s", c.name, want, out)
			}
		}
		if c.stderr != "" && !strings.Contains(errs, c.stderr) {
			t.Errorf("%s: stderr %q lacks %q", c.name, errs, c.stderr)
		}
		code, js, _ := runCLI(t, append(args, "-o", "json")...)
		var res pickResult
		if code != 0 || json.Unmarshal([]byte(js), &res) != nil || len(res.Notes) == 0 || !strings.Contains(strings.Join(res.Notes, "\n"), c.stdout[0]) {
			t.Errorf("%s: -o json: exit %d, notes missing:\n%s", c.name, code, js)
		}
	}
}

// A full match has nothing to explain.
func TestPickFullMatchNoNotes(t *testing.T) {
	code, js, _ := runCLI(t, "tree", "pick", "--service", "reviews", "--from", "region=us-east,zone=us-east-1a,subzone=rack-1", "-o", "json")
	var res pickResult
	if code != 0 || json.Unmarshal([]byte(js), &res) != nil || len(res.Notes) != 0 {
		t.Fatalf("exit %d: %s", code, js)
	}
}

// Issue 14, section 4: pick and inspect read an encoded tree or a topology,
// whichever the file is.
func TestPickInspectAcceptTreeOrTopology(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "tree.bin")
	if code, _, errs := runCLI(t, "tree", "build", "-f", "../../examples/mesh.yaml", "--out", bin); code != 0 {
		t.Fatal(errs)
	}
	for _, f := range []string{bin, "../../examples/mesh.yaml"} {
		code, out, errs := runCLI(t, "tree", "pick", "-f", f, "--service", "reviews", "--from", "region=us-west,zone=us-west-2a,subzone=rack-1", "--count", "100")
		if code != 0 || !strings.Contains(out, "127.0.2.5:9080") {
			t.Errorf("pick -f %s: exit %d: %s %s", f, code, out, errs)
		}
		code, out, errs = runCLI(t, "tree", "inspect", f)
		if code != 0 || !strings.Contains(out, "reviews.default.svc.cluster.local") {
			t.Errorf("inspect %s: exit %d: %s %s", f, code, out, errs)
		}
	}
	code, _, errs := runCLI(t, "tree", "pick", "-f", bin, "--service", "reviews", "--node", "node-d")
	if code != 1 || !strings.Contains(errs, "--node needs a topology") {
		t.Errorf("pick --node on a tree: exit %d, %q", code, errs)
	}
}

// tree inspect orders siblings by name (not by label hash) and says why an
// endpoint is not eligible.
func TestInspectOrderAndReasons(t *testing.T) {
	code, out, errs := runCLI(t, "tree", "inspect")
	if code != 0 {
		t.Fatal(errs)
	}
	svc := out[strings.Index(out, "\nreviews."):]
	east, west, eu := strings.Index(svc, "─ us-east"), strings.Index(svc, "─ us-west"), strings.Index(svc, "─ eu-central")
	if eu < 0 || eu > east || east > west {
		t.Errorf("regions of reviews not in name order (eu-central %d, us-east %d, us-west %d):\n%s", eu, east, west, svc)
	}
	if !strings.Contains(out, "not eligible: 127.0.2.4:9080 (unhealthy)") {
		t.Errorf("no reason for the ineligible endpoint:\n%s", out)
	}
}

// inspect -o json gives the reason too.
func TestInspectJSONReasons(t *testing.T) {
	code, out, errs := runCLI(t, "tree", "inspect", "-o", "json")
	if code != 0 {
		t.Fatal(errs)
	}
	var got jsonTree
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	for _, s := range got.Services {
		if strings.HasPrefix(s.Name, "reviews.") && s.IneligibleReasons["127.0.2.4:9080"] != "unhealthy" {
			t.Fatalf("reviews: reasons %v", s.IneligibleReasons)
		}
	}
}
