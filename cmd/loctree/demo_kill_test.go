package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/internal/testing/wasmtest"
)

// A demo killed with SIGKILL runs no clean-up: its two mounts, its cgroup
// with the programs attached and the pins stay. The next demo removes
// them (only those of a process that is gone). Before, they stayed.
func TestDemoSweepsKilledPredecessor(t *testing.T) {
	cg := kerneltest.Cgroup(t)
	kerneltest.BPFFS(t)
	mod := wasmtest.Build(t, "../../filter")
	before := demoLeftovers()
	child := startLoctree(t, "demo", "--duration", "1h", "--module", mod, "--cache-dir", cacheDir(), "-o", "json")
	pid := child.cmd.Process.Pid
	attached := awaitDemoAttached(t, child, before)
	child.cmd.Process.Kill()
	child.cmd.Wait()
	left := newLeftovers(before)
	attachCg := filepath.Join(filepath.Dir(cg), "loctree-demo-"+strconv.Itoa(pid))
	if len(left) < 3 || !exists(attachCg) || !exists(attached) {
		t.Fatalf("the killed demo left %v, cgroup %s there %v, pins %s there %v: nothing to sweep",
			left, attachCg, exists(attachCg), attached, exists(attached))
	}
	if code, _, errs := runCLI(t, "demo", "--duration", "3s", "--module", mod, "--cache-dir", cacheDir(), "-o", "json"); code != 0 {
		t.Fatalf("the next demo: exit %d: %s", code, errs)
	}
	if still := newLeftovers(before); len(still) > 0 {
		t.Errorf("after the next demo, the killed one's %v are still there", still)
	}
	if exists(attachCg) {
		t.Errorf("after the next demo, the killed one's cgroup %s (with its programs) is still there", attachCg)
	}
}

// SIGINT ends the demo with exit status 130 (128 + SIGINT, as a shell
// reports it) after it removed everything it set up.
func TestDemoInterruptExits130(t *testing.T) {
	kerneltest.Cgroup(t)
	kerneltest.BPFFS(t)
	mod := wasmtest.Build(t, "../../filter")
	before := demoLeftovers()
	child := startLoctree(t, "demo", "--duration", "1h", "--module", mod, "--cache-dir", cacheDir(), "-o", "json")
	awaitDemoAttached(t, child, before)
	child.cmd.Process.Signal(syscall.SIGINT)
	err := child.cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Errorf("after SIGINT: %v, want exit status 130\n%s", err, child.log)
	}
	if left := newLeftovers(before); len(left) > 0 {
		t.Errorf("after SIGINT the demo left %v", left)
	}
}

// awaitDemoAttached waits until a demo started after before has its
// programs attached (their links pinned in its bpffs) and returns the pin
// directory.
func awaitDemoAttached(t *testing.T, child *agentProc, before []string) string {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if child.cmd.ProcessState != nil {
			t.Fatalf("the demo ended: %s", child.log)
		}
		for _, m := range newLeftovers(before) {
			if links, _ := filepath.Glob(filepath.Join(m, "loctree", "link_*")); len(links) > 0 {
				time.Sleep(200 * time.Millisecond) // every hook attached
				return filepath.Join(m, "loctree")
			}
		}
	}
	t.Fatalf("the demo's programs were not attached within 60s: %s", child.log)
	return ""
}

// demoLeftovers are the demo's mount points and temporary directories.
func demoLeftovers() []string {
	var out []string
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	for line := range strings.SplitSeq(string(mi), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.Contains(f[4], "loctree-demo") {
			out = append(out, f[4])
		}
	}
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "loctree-demo*"))
	for _, d := range dirs {
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

// newLeftovers are the demo leftovers not in before.
func newLeftovers(before []string) []string {
	var out []string
	for _, d := range demoLeftovers() {
		if !slices.Contains(before, d) {
			out = append(out, d)
		}
	}
	return out
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
