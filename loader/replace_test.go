package loader

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/loctree/loctree/bpf"
	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/loader/kernel"
)

// TestAgentReplacesIncompatiblePins: the agent takes pins it cannot
// re-adopt (here: started again with another --max-nodes) with a warning
// that names the maps, where it used to refuse to start.
func TestAgentReplacesIncompatiblePins(t *testing.T) {
	kerneltest.RequireRoot(t)
	cg := kerneltest.Cgroup(t)
	dir := filepath.Join(kerneltest.BPFFS(t), "lt")
	var logs bytes.Buffer
	for _, nodes := range []uint32{1 << 12, 1 << 13} {
		cfg := AgentConfig{Cgroup: cg, BPFFS: dir, Once: true, Capacity: kernel.Capacity{Nodes: nodes},
			Logger: slog.New(slog.NewTextHandler(&logs, nil))}
		if err := Run(context.Background(), cfg); err != nil {
			t.Fatalf("agent --once --max-nodes %d: %v", nodes, err)
		}
	}
	if n := pinnedMaxEntries(t, dir, bpf.MapNodes); n != 1<<13 {
		t.Fatalf("pinned %s holds %d entries, want 8192", bpf.MapNodes, n)
	}
	if !strings.Contains(logs.String(), "level=WARN msg=\"pinned maps differ") || !strings.Contains(logs.String(), bpf.MapNodes) {
		t.Fatalf("no warning naming the replaced maps:\n%s", logs.String())
	}
	if err := kernel.Uninstall(cg, dir); err != nil {
		t.Fatal(err)
	}
}

// pinnedMaxEntries is the capacity of the map pinned in dir under name.
func pinnedMaxEntries(t *testing.T, dir, name string) uint32 {
	t.Helper()
	m, err := ebpf.LoadPinnedMap(filepath.Join(dir, name), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	return m.MaxEntries()
}
