package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loctree/loctree/internal/testing/kerneltest"
)

// Issue 14, section 3: the agent refuses a --locality key that no service
// routes on (a typo would route as if no locality were given), warns when
// there is no locality, and reports a --cgroup that is not cgroup v2 before
// anything is installed.
func TestAgentChecksBeforeInstalling(t *testing.T) {
	notCgroup2 := t.TempDir()
	fs := filepath.Join(t.TempDir(), "loctree")
	cases := []struct {
		name   string
		args   []string
		stderr []string
	}{
		{"unknown key", []string{"--locality", "regoin=us-east"}, []string{`--locality: "regoin" is not a scope of any service`, "nearest: region"}},
		{"unknown cgroup key", []string{"--locality", "region=us-east", "--cgroup-locality", notCgroup2 + "/x:zoen=a"}, []string{`--cgroup-locality: "zoen" is not a scope of any service`}},
		{"no locality", nil, []string{"warning: no --locality", "not a cgroup v2 directory"}},
		{"cgroup v1", []string{"--locality", "region=us-east"}, []string{"--cgroup " + notCgroup2 + ": not a cgroup v2 directory"}},
	}
	for _, c := range cases {
		args := append([]string{"agent", "--once", "--listen", "", "--cgroup", notCgroup2, "--bpffs", fs}, c.args...)
		code, _, errs := runCLI(t, args...)
		if code != 1 {
			t.Errorf("%s: exit %d, want 1", c.name, code)
		}
		for _, want := range c.stderr {
			if !strings.Contains(errs, want) {
				t.Errorf("%s: stderr lacks %q:\n%s", c.name, want, errs)
			}
		}
		if _, err := os.Stat(fs); err == nil {
			t.Fatalf("%s: %s was created: something was installed", c.name, fs)
		}
	}
}

// uninstall says what it removed, and that there was nothing the second time.
func TestAgentUninstallReports(t *testing.T) {
	kerneltest.RequireRoot(t)
	cg, fs := kerneltest.Cgroup(t), filepath.Join(kerneltest.BPFFS(t), "loctree")
	topo := filepath.Join(t.TempDir(), "mesh.yaml")
	os.WriteFile(topo, []byte(agentTopology("127.0.7.1:9100")), 0o644)
	if code, _, errs := runCLI(t, "agent", "--once", "-f", topo, "--locality", "region=r1,zone=z1", "--cgroup", cg, "--bpffs", fs, "--listen", ""); code != 0 {
		t.Fatalf("agent --once: %s", errs)
	}
	code, out, errs := runCLI(t, "agent", "uninstall", "--cgroup", cg, "--bpffs", fs)
	if code != 0 {
		t.Fatalf("uninstall: exit %d: %s", code, errs)
	}
	for _, want := range []string{"removed " + filepath.Join(fs, "link_lt_connect4"), "removed " + filepath.Join(fs, "lt_frontends"), "removed " + fs} {
		if !strings.Contains(out, want) {
			t.Errorf("uninstall output lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = runCLI(t, "agent", "uninstall", "--cgroup", cg, "--bpffs", fs)
	if code != 0 || !strings.Contains(out, "nothing to remove") {
		t.Errorf("second uninstall: exit %d:\n%s", code, out)
	}
}
