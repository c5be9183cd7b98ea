package kernel

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/loctree/loctree/bpf"
	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/shared"
)

// TestReplaceIncompatiblePins: an agent started on pins it cannot re-adopt
// (here other capacities; a newer agent with another map layout is the
// same case) installs into new maps while the programs already attached
// keep connecting with the old tree, switches the links to its programs,
// then takes the pins; maps that still fit are kept, and the next agent
// re-adopts the new ones. Without Replace, Open refuses.
func TestReplaceIncompatiblePins(t *testing.T) {
	kerneltest.RequireRoot(t)
	const vip, old, next = "127.77.9.1:80", "127.0.9.1:9009", "127.0.9.2:9009"
	kerneltest.Backends(t, []string{old, next})
	cg := kerneltest.Cgroup(t)
	dir := filepath.Join(kerneltest.BPFFS(t), "lt")
	tree := func(backend string, gen uint64) *shared.Tree {
		return mustBuild(t, &shared.Topology{Services: []shared.ServiceSpec{
			{Name: "svc", VIP: vip, Endpoints: []shared.EndpointSpec{{Address: backend}}},
		}}, gen)
	}
	first, err := Open(Config{BPFFS: dir, Capacity: Capacity{Nodes: 1 << 12}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Apply(tree(old, 1)); err != nil {
		t.Fatal(err)
	}
	if err := first.Attach(cg); err != nil {
		t.Fatal(err)
	}
	first.Close()
	socks := pinnedMapID(t, dir, bpf.MapSocks)

	bigger := Capacity{Nodes: 1 << 13}
	if _, err := Open(Config{BPFFS: dir, Capacity: bigger}); !errors.Is(err, ErrPinned) {
		t.Fatalf("other capacity without Replace: %v, want ErrPinned", err)
	}
	second, err := Open(Config{BPFFS: dir, Capacity: bigger, Replace: true})
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	want := slices.Sorted(slices.Values(treeMaps))
	if !slices.Equal(second.k.replaced, want) {
		t.Fatalf("replaced maps %v, want the tree's %v", second.k.replaced, want)
	}
	if _, err := second.Apply(tree(next, 2)); err != nil {
		t.Fatal(err)
	}
	askIs(t, vip, old, "after the new agent installed, before it attached")
	if err := second.Attach(cg); err != nil {
		t.Fatal(err)
	}
	askIs(t, vip, next, "after the new agent attached")
	if n := pinnedMaxEntries(t, dir, bpf.MapNodes); n != bigger.Nodes {
		t.Fatalf("pinned %s holds %d entries, want the new %d", bpf.MapNodes, n, bigger.Nodes)
	}
	if id := pinnedMapID(t, dir, bpf.MapSocks); id != socks {
		t.Fatalf("pinned %s is map %d, was %d: a map that fits was replaced", bpf.MapSocks, id, socks)
	}
	second.Close()
	askIs(t, vip, next, "after the new agent exited")

	third, err := Open(Config{BPFFS: dir, Capacity: bigger})
	if err != nil {
		t.Fatalf("re-adopting the replaced pins: %v", err)
	}
	if third.Generation() != 2 || len(third.installed) != 1 || len(third.k.replaced) != 0 {
		t.Fatalf("re-adopted generation %d, %d services, replaced %v", third.Generation(), len(third.installed), third.k.replaced)
	}
	third.Close()
	if err := Uninstall("", dir); err != nil {
		t.Fatal(err)
	}
}

// askIs connects to vip and wants backend to answer.
func askIs(t *testing.T, vip, backend, when string) {
	t.Helper()
	for range 5 {
		if got, err := kerneltest.Ask(vip); got != backend || err != nil {
			t.Fatalf("%s: %s answered by %q (%v), want %s", when, vip, got, err, backend)
		}
	}
}

func loadPinned(t *testing.T, dir, name string) *ebpf.Map {
	t.Helper()
	m, err := ebpf.LoadPinnedMap(filepath.Join(dir, name), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func pinnedMapID(t *testing.T, dir, name string) ebpf.MapID {
	t.Helper()
	info, err := loadPinned(t, dir, name).Info()
	if err != nil {
		t.Fatal(err)
	}
	id, _ := info.ID()
	return id
}

func pinnedMaxEntries(t *testing.T, dir, name string) uint32 {
	t.Helper()
	return loadPinned(t, dir, name).MaxEntries()
}
