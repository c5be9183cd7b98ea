package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loctree/loctree/internal/testing/kerneltest"
)

// An agent stopped by SIGTERM or SIGINT says what it leaves in place
// (logLeftInPlace): its programs stay attached and pinned (the kernel path
// keeps serving), and the command that removes them.
func TestAgentSaysWhatStaysOnSignal(t *testing.T) {
	kerneltest.RequireRoot(t)
	cg, fs := kerneltest.Cgroup(t), filepath.Join(kerneltest.BPFFS(t), "loctree")
	topo := filepath.Join(t.TempDir(), "mesh.yaml")
	if err := os.WriteFile(topo, []byte(agentTopology("127.0.7.1:9100")), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		listen := kerneltest.FreeAddr(t)
		agent := startLoctree(t, "agent", "-f", topo, "--locality", "region=r1,zone=z1", "--cgroup", cg, "--bpffs", fs, "--listen", listen)
		kerneltest.Eventually(t, 10*time.Second, "healthz", func() error {
			code, _, _, err := httpGet("http://" + listen + "/healthz")
			if err == nil && code != 200 {
				err = fmt.Errorf("healthz %d", code)
			}
			return err
		})
		agent.cmd.Process.Signal(sig)
		if err := agent.cmd.Wait(); err != nil {
			t.Fatalf("agent after %s: %v\n%s", sig, err, agent.log)
		}
		uninstall := fmt.Sprintf("loctree agent uninstall --cgroup %s --bpffs %s", cg, fs)
		if log := agent.log.String(); !strings.Contains(log, "stay attached") || !strings.Contains(log, uninstall) {
			t.Errorf("after %s the agent's log does not say the programs stay attached and %q removes them:\n%s", sig, uninstall, log)
		}
	}
	runLoctree(t, "agent", "uninstall", "--cgroup", cg, "--bpffs", fs)
}
