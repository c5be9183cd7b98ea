package loader

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/internal/testing/syncbuf"
	"github.com/loctree/loctree/shared"
)

// TestAgentDirectoryPastBadEntries: an agent on a directory keeps serving
// while a symlink loop, then a dangling symlink, sits beside the files; a
// change made meanwhile reaches the kernel once the bad entry is gone (it
// used to be lost for good, a silent misroute), and each bad entry is
// logged once, not on every poll.
func TestAgentDirectoryPastBadEntries(t *testing.T) {
	kerneltest.RequireRoot(t)
	const vip, old, fixed = "127.77.3.2:80", "127.0.22.2:9401", "127.0.22.3:9401"
	kerneltest.Backends(t, []string{old, fixed})
	dir := t.TempDir()
	svc := func(endpoint string) string {
		return fmt.Sprintf("services:\n- name: b\n  vip: %s\n  endpoints:\n  - address: %s\n", vip, endpoint)
	}
	write := func(name, data string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name+".tmp"), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, name+".tmp"), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	write("b.yml", svc(old))
	logs := &syncbuf.Buffer{}
	runAgent(t, AgentConfig{Topology: dir, Cgroup: kerneltest.Cgroup(t), Locality: shared.Locality{"region": "r1"},
		Watch: 10 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	lands := func(want string) func() error {
		return func() error {
			if got, err := kerneltest.Ask(vip); got != want || err != nil {
				return fmt.Errorf("%s answered by %q (%v), want %s", vip, got, err, want)
			}
			return nil
		}
	}
	kerneltest.Eventually(t, 10*time.Second, "the first tree", lands(old))
	rejected := func() int {
		return strings.Count(logs.String(), `msg="source state rejected; keeping the installed tree"`)
	}
	for i, bad := range [][]string{{"l2.yaml", "l1.yaml", "l1.yaml", "l2.yaml"}, {"/nonexistent", "zz.yaml"}} {
		before := rejected()
		for j := 0; j < len(bad); j += 2 {
			os.Symlink(bad[j], filepath.Join(dir, bad[j+1]))
		}
		endpoint := map[int]string{0: fixed, 1: old}[i]
		write("b.yml", svc(endpoint))
		time.Sleep(200 * time.Millisecond) // 20 polls
		if err := lands(map[int]string{0: old, 1: fixed}[i])(); err != nil {
			t.Fatalf("bad entry %v: the installed tree changed: %v", bad, err)
		}
		for j := 1; j < len(bad); j += 2 {
			os.Remove(filepath.Join(dir, bad[j]))
		}
		kerneltest.Eventually(t, 5*time.Second, "the change held back by a bad entry", lands(endpoint))
		// Once; a loop removed link by link dangles in between: twice.
		if n := rejected() - before; n < 1 || n > len(bad)/2 {
			t.Fatalf("bad entry %v logged %d times in 20 polls, want once:\n%s", bad, n, logs.String())
		}
	}
}

// TestAgentEmptyDirectory: an agent on a directory with no topology files
// fails to start with an error saying so (it used to panic), and leaves no
// pins behind.
func TestAgentEmptyDirectory(t *testing.T) {
	kerneltest.RequireRoot(t)
	dir, pins := t.TempDir(), filepath.Join(kerneltest.BPFFS(t), "lt")
	err := Run(context.Background(), AgentConfig{Topology: dir, Cgroup: kerneltest.Cgroup(t), BPFFS: pins})
	if err == nil || !strings.Contains(err.Error(), "no services") {
		t.Fatalf("agent on an empty directory: %v, want an error saying it has no services", err)
	}
	if ents, _ := os.ReadDir(pins); len(ents) != 0 {
		t.Fatalf("left %d pins behind", len(ents))
	}
}
