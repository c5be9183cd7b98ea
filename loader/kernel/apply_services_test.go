package kernel

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/shared"
	"github.com/loctree/loctree/shared/wire"
)

// checkInstalled compares the kernel's maps with what a full Apply of tree
// installs: one frontend per service with a VIP, no other, each with the
// service's digest and a copy of its records in its regions.
func checkInstalled(t *testing.T, in *Installer, tree *shared.Tree) {
	t.Helper()
	got := frontends(t, in)
	n := 0
	for _, s := range tree.Services() {
		if !s.VIP().IsValid() {
			continue
		}
		n++
		v, ok := got[FrontendOf(s.VIP())]
		if !ok || v.Digest != digest(tree, s, sourceLabels(s, in.locality)) {
			t.Fatalf("service %s: installed %v with digest %#x, want %#x", s.Name(), ok, v.Digest, digest(tree, s, sourceLabels(s, in.locality)))
		}
		nodes, eps := records(tree, s)
		gotEps := make([]byte, len(eps))
		if _, err := in.k.eps.ReadAt(gotEps, int64(v.EpBase)*wire.EndpointRecordSize); err != nil {
			t.Fatal(err)
		}
		gotNodes := make([]byte, len(nodes))
		if _, err := in.k.nodes.ReadAt(gotNodes, int64(v.NodeBase)*wire.NodeRecordSize); err != nil {
			t.Fatal(err)
		}
		// Node records keep the indices of the tree they were written from;
		// the value's deltas map them, so compare them made relative.
		oldRoot, oldFirst := v.NodeBase-v.NodeDelta, v.EpBase-v.EpDelta
		if !slices.Equal(gotEps, eps) || !slices.Equal(relative(gotNodes, oldRoot, oldFirst), relative(nodes, s.Root(), s.FirstEndpoint())) {
			t.Fatalf("service %s: records in the maps differ from the tree's", s.Name())
		}
	}
	if len(got) != n {
		t.Fatalf("%d frontends installed, want %d", len(got), n)
	}
}

// TestApplyServicesMatchesApply: per-service applies of random changes
// (endpoints, VIPs moving between services, services added and removed)
// leave the maps as a full Apply of the same tree would, and rewrite only
// the changed services.
func TestApplyServicesMatchesApply(t *testing.T) {
	kerneltest.RequireRoot(t)
	// Nodes: the records and child tables (about 3 entries per node) of 20
	// services of up to 300 endpoints, and the old copies of changed ones.
	in, err := Open(Config{Locality: benchLocality, Capacity: Capacity{Services: 64, Nodes: 1 << 15, Endpoints: 1 << 14}})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	rng := rand.New(rand.NewPCG(15, 2))
	var b shared.Builder
	specs := map[string]shared.ServiceSpec{}
	for i := range 20 {
		s := bigService(fmt.Sprintf("svc-%02d", i), fmt.Sprintf("127.77.9.%d:80", i+1), 1+rng.IntN(300), 9500)
		specs[s.Name] = s
	}
	tree, err := b.Update(slices.Collect(mapValues(specs)), nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.ApplyServices(tree, nil); err != nil { // first: a full apply
		t.Fatal(err)
	}
	checkInstalled(t, in, tree)
	for step := range 60 {
		name := fmt.Sprintf("svc-%02d", rng.IntN(24))
		var upserts []shared.ServiceSpec
		var removes []string
		switch _, ok := specs[name]; {
		case ok && rng.IntN(5) == 0:
			removes = []string{name}
			delete(specs, name)
		default:
			vip := fmt.Sprintf("127.77.9.%d:80", 1+rng.IntN(40))
			if slices.ContainsFunc(slices.Collect(mapValues(specs)), func(s shared.ServiceSpec) bool { return s.VIP == vip && s.Name != name }) {
				vip = ""
			}
			s := bigService(name, vip, 1+rng.IntN(300), 9500+rng.IntN(3))
			specs[name] = s
			upserts = []shared.ServiceSpec{s}
		}
		if len(specs) == 0 {
			break
		}
		next, err := b.Update(upserts, removes, uint64(step+2))
		if err != nil {
			t.Fatal(err)
		}
		res, err := in.ApplyServices(next, append(removes, names(upserts)...))
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if res.Rewritten > 1 || res.Removed > 1 {
			t.Fatalf("step %d: %+v, want at most one service rewritten or removed", step, res)
		}
		full, _ := in.plans(next)
		if res.Services != len(full) {
			t.Fatalf("step %d: result says %d services, the tree has %d with a VIP", step, res.Services, len(full))
		}
		checkInstalled(t, in, next)
	}
}

func mapValues[K comparable, V any](m map[K]V) func(func(V) bool) {
	return func(yield func(V) bool) {
		for _, v := range m {
			if !yield(v) {
				return
			}
		}
	}
}

func names(specs []shared.ServiceSpec) []string {
	var out []string
	for _, s := range specs {
		out = append(out, s.Name)
	}
	return out
}

// BenchmarkApplyServices applies a change of one 1,000-endpoint service in
// a tree of S services (S−1 of 10 endpoints): the cost must not grow with S.
func BenchmarkApplyServices(b *testing.B) {
	kerneltest.RequireRoot(b)
	for _, services := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("S=%d", services), func(b *testing.B) { benchApply(b, services, false) })
	}
}

// BenchmarkApplyWholeTree is BenchmarkApplyServices through Apply, which
// compares every service of the tree (the agent's path before issue 15).
func BenchmarkApplyWholeTree(b *testing.B) {
	kerneltest.RequireRoot(b)
	for _, services := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("S=%d", services), func(b *testing.B) { benchApply(b, services, true) })
	}
}

func benchApply(b *testing.B, services int, whole bool) {
	// Nodes: 10,000 services of 31 nodes and their child tables fill 1<<20
	// entries to about 90 %, and an apply would wait for grace periods.
	in, err := Open(Config{Locality: benchLocality, Capacity: Capacity{Services: 16384, Nodes: 1 << 21, Endpoints: 1 << 18}})
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	var bld shared.Builder
	top := manyServices(services-1, 10, 1)
	big := [2]shared.ServiceSpec{bigService("big", "127.78.0.1:80", 1000, 9400), bigService("big", "127.78.0.1:80", 1000, 9401)}
	tree, err := bld.Update(append(top.Services, big[0]), nil, 1)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := in.Apply(tree); err != nil {
		b.Fatal(err)
	}
	trees := [2]*shared.Tree{}
	for i := range trees {
		if trees[i], err = bld.Update(big[i:i+1], nil, uint64(i+2)); err != nil {
			b.Fatal(err)
		}
	}
	changed := []string{"big"}
	i := 1
	for b.Loop() {
		var res Result
		if whole {
			res, err = in.Apply(trees[i%2])
		} else {
			res, err = in.ApplyServices(trees[i%2], changed)
		}
		if err != nil || res.Rewritten != 1 {
			b.Fatalf("%+v %v", res, err)
		}
		i++
	}
}

// relative is node records with their indices made relative to the
// service's root and first endpoint.
func relative(nodes []byte, root, first uint32) []byte {
	out := slices.Clone(nodes)
	le := binary.LittleEndian
	for off := 0; off < len(out); off += wire.NodeRecordSize {
		n := out[off:]
		le.PutUint32(n[8:], le.Uint32(n[8:])-first)
		le.PutUint32(n[12:], le.Uint32(n[12:])-first)
		if le.Uint32(n[20:]) > 0 {
			le.PutUint32(n[16:], le.Uint32(n[16:])-root)
		}
	}
	return out
}

// TestApplyServicesRefusedKeepsState: a change refused for capacity leaves
// the installer as it was, so a later removal of the same service still
// removes it from the kernel.
func TestApplyServicesRefusedKeepsState(t *testing.T) {
	kerneltest.RequireRoot(t)
	in, err := Open(Config{Locality: benchLocality, Capacity: Capacity{Services: 8, Nodes: 256, Endpoints: 64}})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var b shared.Builder
	small := []shared.ServiceSpec{bigService("a", "127.77.9.1:80", 10, 9500), bigService("b", "127.77.9.2:80", 10, 9500)}
	tree, err := b.Update(small, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.ApplyServices(tree, nil); err != nil {
		t.Fatal(err)
	}
	big, err := b.Update([]shared.ServiceSpec{bigService("a", "127.77.9.1:80", 60, 9500)}, nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.ApplyServices(big, []string{"a"}); !errors.Is(err, ErrCapacity) {
		t.Fatalf("error %v, want ErrCapacity", err)
	}
	b.Revert()
	gone, err := b.Update(nil, []string{"a"}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := in.ApplyServices(gone, []string{"a"}); err != nil || res.Removed != 1 {
		t.Fatalf("removal after a refused change: %+v %v", res, err)
	}
	checkInstalled(t, in, gone)
}

// TestApplyServicesAtCapacity: with exactly --max-services services
// installed, a change to one of them still fits (it replaces itself), and a
// service moving to another VIP frees its old frontend; one more service
// does not fit.
func TestApplyServicesAtCapacity(t *testing.T) {
	kerneltest.RequireRoot(t)
	in, err := Open(Config{Locality: benchLocality, Capacity: Capacity{Services: 2, Nodes: 256, Endpoints: 64}})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var b shared.Builder
	full := []shared.ServiceSpec{bigService("a", "127.77.9.1:80", 4, 9500), bigService("b", "127.77.9.2:80", 4, 9500)}
	tree, err := b.Update(full, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.ApplyServices(tree, nil); err != nil {
		t.Fatal(err)
	}
	for gen, spec := range []shared.ServiceSpec{
		bigService("a", "127.77.9.1:80", 5, 9500), // endpoints change
		bigService("a", "127.77.9.3:80", 5, 9500), // the VIP moves
	} {
		tree, err := b.Update([]shared.ServiceSpec{spec}, nil, uint64(gen+2))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := in.ApplyServices(tree, []string{"a"}); err != nil {
			t.Fatalf("change %d of an installed service at capacity: %v", gen, err)
		}
		b.Commit()
		checkInstalled(t, in, tree)
	}
	more, err := b.Update([]shared.ServiceSpec{bigService("c", "127.77.9.4:80", 1, 9500)}, nil, 4)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.ApplyServices(more, []string{"c"}); !errors.Is(err, ErrCapacity) {
		t.Fatalf("a third service with capacity 2: %v, want ErrCapacity", err)
	}
}
