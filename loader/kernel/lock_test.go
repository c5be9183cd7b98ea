package kernel

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/loctree/loctree/internal/testing/kerneltest"
)

// TestOneAgentPerBPFFS: while an agent holds a bpffs directory, a second
// agent (daemon or --once, both open an Installer) and uninstall refuse,
// naming the holder's pid; once it is closed, the next one starts.
func TestOneAgentPerBPFFS(t *testing.T) {
	kerneltest.RequireRoot(t)
	dir := filepath.Join(kerneltest.BPFFS(t), "loctree")
	a, err := Open(Config{BPFFS: dir})
	if err != nil {
		t.Fatal(err)
	}
	pid := "pid " + strconv.Itoa(os.Getpid())
	if _, err := Open(Config{BPFFS: dir}); !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), pid) {
		t.Fatalf("second agent on %s: %v; want ErrLocked naming %s", dir, err, pid)
	}
	if err := Uninstall("", dir); !errors.Is(err, ErrLocked) {
		t.Fatalf("uninstall under a running agent: %v; want ErrLocked", err)
	}
	a.Close()
	b, err := Open(Config{BPFFS: dir})
	if err != nil {
		t.Fatalf("after the first agent closed: %v", err)
	}
	b.Close()
	if err := Uninstall("", dir); err != nil {
		t.Fatal(err)
	}
}
