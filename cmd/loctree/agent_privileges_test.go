package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/loctree/loctree/internal/manifest"
	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/istio"
)

// daemonSetCapabilities decodes istio/base/daemonset.yaml into its official
// type and returns the capabilities its agent container adds, as setpriv
// names them (bpf, net_admin, ...).
func daemonSetCapabilities(t *testing.T) []string {
	t.Helper()
	data, err := istio.Files.ReadFile("base/daemonset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs, err := manifest.Split(data)
	if err != nil {
		t.Fatal(err)
	}
	var caps []string
	for _, d := range docs {
		obj, err := manifest.Decode(d)
		if err != nil {
			t.Fatal(err)
		}
		if ds, ok := obj.(*appsv1.DaemonSet); ok {
			for _, c := range ds.Spec.Template.Spec.Containers[0].SecurityContext.Capabilities.Add {
				caps = append(caps, strings.ToLower(string(c)))
			}
		}
	}
	if len(caps) == 0 {
		t.Fatal("the DaemonSet's agent container adds no capabilities")
	}
	return caps
}

// runWithCapabilities runs `loctree args...` as root limited to caps (the
// bounding set, so an unprivileged container's view) and returns its error.
func runWithCapabilities(t *testing.T, caps []string, args ...string) ([]byte, error) {
	t.Helper()
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatalf("setpriv (util-linux) is needed to drop capabilities: %v", err)
	}
	bset := "-all"
	for _, c := range caps {
		bset += ",+" + c
	}
	cmd := exec.Command(setpriv, append([]string{"--bounding-set", bset, "--", os.Args[0]}, args...)...)
	cmd.Env = append(os.Environ(), "LOCTREE_TEST_MAIN=1")
	return cmd.CombinedOutput()
}

// TestAgentLeastPrivileges runs the agent with exactly the capabilities the
// DaemonSet grants: it must load, attach and redirect. With one of them
// taken away it must fail, so the manifest asks for no more than it needs
// and no less.
func TestAgentLeastPrivileges(t *testing.T) {
	kerneltest.RequireRoot(t)
	caps := daemonSetCapabilities(t)
	cg, fs := kerneltest.Cgroup(t), filepath.Join(kerneltest.BPFFS(t), "loctree")
	kerneltest.Backends(t, []string{"127.0.7.1:9100", "127.0.7.9:9100"})
	topo := filepath.Join(t.TempDir(), "mesh.yaml")
	os.WriteFile(topo, []byte(agentTopology("127.0.7.1:9100")), 0o644)
	args := []string{"agent", "--once", "-f", topo, "--locality", "region=r1,zone=z1", "--cgroup", cg, "--bpffs", fs, "--listen", ""}
	for i, dropped := range caps {
		fewer := append(append([]string{}, caps[:i]...), caps[i+1:]...)
		out, err := runWithCapabilities(t, fewer, args...)
		if err == nil {
			t.Errorf("the agent installed without CAP_%s (with %v): the DaemonSet asks for more than it needs\n%s", strings.ToUpper(dropped), fewer, out)
			runLoctree(t, "agent", "uninstall", "--cgroup", cg, "--bpffs", fs)
		} else if want := "lacks CAP_" + strings.ToUpper(dropped); !strings.Contains(string(out), want) {
			t.Errorf("without CAP_%s the agent's error does not say %q:\n%s", strings.ToUpper(dropped), want, out)
		}
	}
	if out, err := runWithCapabilities(t, caps, args...); err != nil {
		t.Fatalf("the agent with the DaemonSet's capabilities %v: %v\n%s", caps, err, out)
	}
	if err := landsOn("127.0.7.1:9100")(); err != nil {
		t.Fatal(err)
	}
	// uninstall detaches with the same capabilities; it cannot read the
	// names of programs left attached without CAP_SYS_ADMIN, and says so.
	out, err := runWithCapabilities(t, caps, "agent", "uninstall", "--cgroup", cg, "--bpffs", fs)
	if err != nil {
		t.Fatalf("uninstall with the DaemonSet's capabilities: %v\n%s", err, out)
	}
	if _, err := kerneltest.Ask("127.77.1.1:80"); err == nil {
		t.Fatal("the VIP still answers after uninstall")
	}
	// without CAP_BPF uninstall refuses, naming it, instead of a kernel
	// feature message ("BPF_PROG_QUERY not supported").
	if out, err := runWithCapabilities(t, nil, "agent", "uninstall", "--cgroup", cg, "--bpffs", fs); err == nil || !strings.Contains(string(out), "lacks CAP_BPF") {
		t.Errorf("uninstall without capabilities: %v\n%s", err, out)
	}
	runLoctree(t, "agent", "uninstall", "--cgroup", cg, "--bpffs", fs)
}
