package kernel

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"testing"

	"github.com/loctree/loctree/bpf"
	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/shared"
)

// TestApplyRewritesOnlyChanged: applying the same topology again writes
// nothing; changing one service rewrites only that one, even when it
// shifts every later service's position in the tree.
func TestApplyRewritesOnlyChanged(t *testing.T) {
	kerneltest.RequireRoot(t)
	in, err := Open(Config{Locality: shared.Locality{"region": "r1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	top := mesh()
	steps := []struct {
		name              string
		change            func(*shared.Topology)
		rewritten, remove int
	}{
		{"first", func(*shared.Topology) {}, 5, 0},
		{"same", func(*shared.Topology) {}, 0, 0},
		{"grow the first service", func(top *shared.Topology) {
			top.Services[0].Endpoints = append(top.Services[0].Endpoints, ep("127.0.1.9:9001", "r1", "z1"))
		}, 1, 0},
		{"remove one", func(top *shared.Topology) { top.Services = top.Services[:4] }, 0, 1},
		{"node locality irrelevant change", func(top *shared.Topology) { top.Nodes = []shared.NodeSpec{{Name: "n"}} }, 0, 0},
	}
	for i, s := range steps {
		s.change(top)
		res, err := in.Apply(mustBuild(t, top, uint64(i+1)))
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if res.Rewritten != s.rewritten || res.Removed != s.remove {
			t.Fatalf("%s: rewrote %d removed %d, want %d and %d", s.name, res.Rewritten, res.Removed, s.rewritten, s.remove)
		}
	}
}

// TestCapacityKeepsInstalledTree: a tree that does not fit is refused
// with ErrCapacity and the installed services stay as they were.
func TestCapacityKeepsInstalledTree(t *testing.T) {
	kerneltest.RequireRoot(t)
	in, err := Open(Config{Capacity: Capacity{Services: 8, Nodes: 64, Endpoints: 24}})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if _, err := in.Apply(mustBuild(t, mesh(), 1)); err != nil {
		t.Fatal(err)
	}
	before := frontends(t, in)
	big := mesh()
	for i := range 20 {
		big.Services[0].Endpoints = append(big.Services[0].Endpoints, ep(fmt.Sprintf("127.0.6.%d:9006", i+1), "r1", "z1"))
	}
	_, err = in.Apply(mustBuild(t, big, 2))
	if !errors.Is(err, ErrCapacity) {
		t.Fatalf("err = %v, want ErrCapacity", err)
	}
	if after := frontends(t, in); !maps.Equal(after, before) {
		t.Fatalf("installed services changed after a refused apply")
	}
	if in.Generation() != 1 {
		t.Fatalf("generation %d after a refused apply", in.Generation())
	}
}

// frontends reads the frontends map back from the kernel.
func frontends(t *testing.T, in *Installer) map[bpf.Frontend]bpf.Service {
	t.Helper()
	out := map[bpf.Frontend]bpf.Service{}
	var fe bpf.Frontend
	var svc bpf.Service
	it := in.k.objs.LtFrontends.Iterate()
	for it.Next(&fe, &svc) {
		out[fe] = svc
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestReadopt: a second installer on the same bpffs dir finds the services
// of the first and does not rewrite them.
func TestReadopt(t *testing.T) {
	kerneltest.RequireRoot(t)
	dir := filepath.Join(kerneltest.BPFFS(t), "lt")
	tree := mustBuild(t, mesh(), 7)
	first, err := Open(Config{BPFFS: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Apply(tree); err != nil {
		t.Fatal(err)
	}
	first.Close()
	second, err := Open(Config{BPFFS: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if second.Generation() != 7 || len(second.installed) != 5 {
		t.Fatalf("re-adopted generation %d, %d services", second.Generation(), len(second.installed))
	}
	res, err := second.Apply(mustBuild(t, mesh(), 8))
	if err != nil || res.Rewritten != 0 {
		t.Fatalf("apply after re-adopt: %+v %v", res, err)
	}
	other := mesh()
	other.Services[1].Mode = "failover"
	if res, err := second.Apply(mustBuild(t, other, 9)); err != nil || res.Rewritten != 1 {
		t.Fatalf("one change after re-adopt: %+v %v", res, err)
	}
	second.Close()
	if _, err := Open(Config{BPFFS: dir, Capacity: Capacity{Endpoints: 1000}}); !errors.Is(err, ErrPinned) {
		t.Fatalf("other capacity on pinned maps: %v, want ErrPinned", err)
	}
	if err := Uninstall("", dir); err != nil {
		t.Fatal(err)
	}
}

// TestGenerationSurvivesRestart: a tree whose changes are all in services
// without a VIP rewrites nothing in the kernel, yet its generation was
// served to the filters. An installer opened again on the same pins must
// continue after it, or the agent would serve other content under a
// generation (ETag) the filters already hold, and they would keep it.
func TestGenerationSurvivesRestart(t *testing.T) {
	kerneltest.RequireRoot(t)
	dir := filepath.Join(kerneltest.BPFFS(t), "lt")
	t.Cleanup(func() { Uninstall("", dir) })
	first, err := Open(Config{BPFFS: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Apply(mustBuild(t, mesh(), 1)); err != nil {
		t.Fatal(err)
	}
	l7 := mesh()
	l7.Services = append(l7.Services, shared.ServiceSpec{Name: "l7-only", Endpoints: []shared.EndpointSpec{ep("127.0.9.1:80", "r1", "z1")}})
	if res, err := first.Apply(mustBuild(t, l7, 2)); err != nil || res.Rewritten != 0 {
		t.Fatalf("a change to a service without a VIP: %+v %v, want nothing rewritten", res, err)
	}
	first.Close()
	second, err := Open(Config{BPFFS: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if g := second.Generation(); g != 2 {
		t.Fatalf("re-adopted generation %d, want 2 (the last applied)", g)
	}
}
