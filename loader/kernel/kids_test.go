package kernel

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/internal/testing/treetest"
	"github.com/loctree/loctree/shared"
	"github.com/loctree/loctree/shared/wire"
)

// TestKidConstantsMatchHeader: the loader's child table constants are
// bpf/lib/kids.h's (which bpf2go does not export: defines leave no BTF).
func TestKidConstantsMatchHeader(t *testing.T) {
	h, err := os.ReadFile("../../bpf/lib/kids.h")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]uint64{
		"LT_KID_PROBES": kidProbes, "LT_KID_EMPTY": uint64(kidEmpty), "LT_KID_MIX": kidMix,
	} {
		m := regexp.MustCompile(`(?m)^#define ` + name + `\s+(0x[0-9a-f]+|[0-9]+)(U|ULL)?\b`).FindSubmatch(h)
		if m == nil {
			t.Fatalf("no #define %s in kids.h", name)
		}
		got, err := strconv.ParseUint(string(m[1]), 0, 64)
		if err != nil || got != want {
			t.Errorf("%s = %s in kids.h, %#x in loader/kids.go", name, m[1], want)
		}
	}
}

// installedKids is a child table as the kernel finds it: its home slots
// and its records.
type installedKids struct {
	slots   uint32
	records []byte
}

// kidFind searches a child table as lt_kid_in does: from the key's home,
// at most kidProbes slots, stopping at a free one. It fails the test when a
// search would read past the table.
func kidFind(t *testing.T, k installedKids, first uint32, label uint64) (kidKey, bool) {
	t.Helper()
	i := kidHome(first, label, k.slots)
	for p := range uint32(kidProbes) {
		if i+p >= uint32(len(k.records)/wire.NodeRecordSize) {
			t.Fatalf("search for (%d, %#x) reads slot %d of a %d-byte table", first, label, i+p, len(k.records))
		}
		rec := k.records[int(i+p)*wire.NodeRecordSize:]
		f := binary.LittleEndian.Uint32(rec[8:])
		if f == kidEmpty {
			return kidKey{}, false
		}
		if f == first && binary.LittleEndian.Uint64(rec) == label {
			return kidKey{label, f, binary.LittleEndian.Uint32(rec[12:]), binary.LittleEndian.Uint32(rec[16:]), binary.LittleEndian.Uint32(rec[20:])}, true
		}
	}
	return kidKey{}, false
}

// regionTree is one tree of a service as shared decodes it, and where the
// loader puts its records in the service's node region.
type regionTree struct {
	node     func(uint32) shared.Node // by absolute index in its section
	from, to uint32                   // absolute indices of its records
	at       uint32                   // region index of record from
}

// regionTrees derives a service's trees from shared's accessors (not from
// the records the loader copies).
func regionTrees(tree *shared.Tree, s *shared.Service) []regionTree {
	l := layoutOf(s)
	out := []regionTree{{tree.Node, l.Root, l.Root + l.NodeCount, 0}}
	switch {
	case s.OverprovisioningFactor() != 0:
		out = append(out, regionTree{tree.AuxNode, l.AuxRoot[0], l.AuxRoot[0] + l.AuxLen(), l.NodeCount})
	case s.NetworkRule():
		out = append(out, regionTree{tree.AuxNode, l.NetRoot, l.NetRoot + l.NetCount, l.NodeCount})
	}
	return out
}

// spill gives a random service Envoy's priority load and a mix of health,
// so that it has aux trees.
func spill(rng *rand.Rand, spec *shared.ServiceSpec) {
	spec.Spillover, spec.Mode, spec.Health = &shared.SpilloverSpec{}, "", ""
	no := false
	for i := range spec.Endpoints {
		switch rng.IntN(4) {
		case 0:
			spec.Endpoints[i].Healthy = &no
		case 1:
			spec.Endpoints[i].Degraded, spec.Endpoints[i].Healthy = true, nil
		}
	}
}

// TestKidTableFindsEveryChild: for random trees (plain, with aux trees of a
// priority load, with a network tree), every (parent, label) pair of the
// service's trees, derived from shared's decoded nodes, is found in the
// loader's table at its child's region index within LT_KID_PROBES slots,
// and labels that are not among a parent's children are not found.
func TestKidTableFindsEveryChild(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	keys, misses := 0, 0
	for it := range 300 {
		top := treetest.Topology(rng, treetest.Options{Services: 1 + rng.IntN(6), MaxEndpoints: 200, NetworkFirst: it%3 == 1})
		for i := range top.Services {
			if it%3 == 2 && i%2 == 0 {
				spill(rng, &top.Services[i])
			}
		}
		tree, err := shared.Build(top, shared.BuildOptions{Generation: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range tree.Services() {
			region, slots, err := regionOf(tree, s, new(kidSlots))
			if err != nil {
				t.Fatal(err)
			}
			k := installedKids{slots, region[nodeLen(s)*wire.NodeRecordSize:]}
			if n := kidTable(k.records).len(); slots > 0 && (n < slots || kidTable(k.records).at(n-1).first != kidEmpty) {
				t.Fatalf("%s: table of %d slots, %d home slots, does not end with a free slot", s.Name(), n, slots)
			}
			for _, rt := range regionTrees(tree, s) {
				n, m := checkKids(t, k, rt, rng)
				keys, misses = keys+n, misses+m
			}
		}
	}
	if keys < 10000 {
		t.Fatalf("only %d keys", keys)
	}
	t.Logf("%d keys found, %d absent labels not found", keys, misses)
}

// checkKids looks up every child of rt's nodes, and labels that are not
// their children, in k.
func checkKids(t *testing.T, k installedKids, rt regionTree, rng *rand.Rand) (found, missed int) {
	t.Helper()
	for p := rt.from; p < rt.to; p++ {
		n := rt.node(p)
		if n.ChildCount == 0 {
			continue
		}
		first := n.FirstChild - rt.from + rt.at
		labels := map[uint64]bool{}
		for c := n.FirstChild; c < n.FirstChild+n.ChildCount; c++ {
			cn := rt.node(c)
			want := kidKey{cn.Label, first, c - rt.from + rt.at, 0, cn.ChildCount}
			if cn.ChildCount > 0 {
				want.childFirst = cn.FirstChild - rt.from + rt.at
			}
			labels[cn.Label] = true
			got, ok := kidFind(t, k, first, cn.Label)
			if !ok || got != want {
				t.Fatalf("child %d of node %d: found %+v, %v; want %+v", c, p, got, ok, want)
			}
			found++
		}
		absent := []uint64{rng.Uint64(), shared.Label("no such value"), rt.node(p).Label, rt.node(rt.from).Label}
		if q := rt.from + uint32(rng.IntN(int(rt.to-rt.from))); true {
			absent = append(absent, rt.node(q).Label)
		}
		for _, l := range absent {
			if labels[l] {
				continue
			}
			if got, ok := kidFind(t, k, first, l); ok {
				t.Fatalf("node %d has no child labelled %#x, the table gives %+v", p, l, got)
			}
			missed++
		}
	}
	return found, missed
}

// TestKidTableProbes: at 2 home slots per key, a table of 100,000 random
// keys holds every key within LT_KID_PROBES slots of its home at the first
// size (a longer probe would make kidTable grow it); it logs the longest
// probe.
func TestKidTableProbes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{10, 1000, 100_000} {
		slots := uint32(2 * n)
		var table kidSlots
		table.reset(slots)
		for i := range n {
			if !table.insert(kidKey{label: rng.Uint64(), first: uint32(rng.IntN(n)), child: uint32(i)}, slots) {
				t.Fatalf("%d keys: no key may sit %d slots past its home at 2 slots per key", n, kidProbes)
			}
		}
		longest := uint32(0)
		for i, s := range table {
			if s.first != kidEmpty {
				longest = max(longest, uint32(i)-kidHome(s.first, s.label, slots)+1)
			}
		}
		t.Logf("%d keys: longest probe %d slots (bound %d)", n, longest, kidProbes)
	}
}

// TestApplyServicesRewritesOneTable: a per-service apply of one changed
// service writes that service's records and child table to its new region
// and nothing else: every other byte of the node map and every other
// frontend value stay as they were, and the table the kernel reads in the
// new region is the service's (its keys found at their children).
func TestApplyServicesRewritesOneTable(t *testing.T) {
	kerneltest.RequireRoot(t)
	in, err := Open(Config{Locality: benchLocality, Capacity: Capacity{Services: 64, Nodes: 1 << 15, Endpoints: 1 << 14}})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var b shared.Builder
	var specs []shared.ServiceSpec
	for i := range 30 {
		specs = append(specs, bigService(fmt.Sprintf("svc-%02d", i), fmt.Sprintf("127.77.9.%d:80", i+1), 50+10*i, 9500))
	}
	tree, err := b.Update(specs, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.ApplyServices(tree, nil); err != nil {
		t.Fatal(err)
	}
	before, nodesBefore := frontends(t, in), nodeMap(t, in)
	changed := bigService("svc-07", "127.77.9.8:80", 333, 9501)
	next, err := b.Update([]shared.ServiceSpec{changed}, nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := in.ApplyServices(next, []string{changed.Name}); err != nil || res.Rewritten != 1 {
		t.Fatalf("apply: %+v, %v", res, err)
	}
	after, nodesAfter := frontends(t, in), nodeMap(t, in)
	fe := FrontendOf(netip.MustParseAddrPort(changed.VIP))
	v := after[fe]
	for f, old := range before {
		if f != fe && after[f] != old {
			t.Fatalf("frontend %+v changed: %+v, was %+v", f, after[f], old)
		}
	}
	for i := range uint32(len(nodesAfter) / wire.NodeRecordSize) {
		inRegion := i-v.NodeBase < v.NodeLen
		rec := func(m []byte) []byte { return m[int(i)*wire.NodeRecordSize:][:wire.NodeRecordSize] }
		if !inRegion && !slices.Equal(rec(nodesBefore), rec(nodesAfter)) {
			t.Fatalf("node map entry %d changed outside the rewritten region [%d, +%d)", i, v.NodeBase, v.NodeLen)
		}
	}
	s, _ := next.Service(changed.Name)
	if v.KidSlots == 0 || v.Kids != v.NodeBase+nodeLen(s) {
		t.Fatalf("service value: table of %d slots at %d, want one after the records at %d", v.KidSlots, v.Kids, v.NodeBase+nodeLen(s))
	}
	table := installedKids{v.KidSlots, nodesAfter[int(v.Kids)*wire.NodeRecordSize : int(v.NodeBase+v.NodeLen)*wire.NodeRecordSize]}
	n, _ := checkKids(t, table, regionTrees(next, s)[0], rand.New(rand.NewPCG(1, 1)))
	if n != int(layoutOf(s).NodeCount)-1 {
		t.Fatalf("%d keys found in the installed table, the tree has %d", n, layoutOf(s).NodeCount-1)
	}
}

// nodeMap reads the whole node map.
func nodeMap(t *testing.T, in *Installer) []byte {
	t.Helper()
	out := make([]byte, int(in.k.capacity().Nodes)*wire.NodeRecordSize)
	if _, err := in.k.nodes.ReadAt(out, 0); err != nil {
		t.Fatal(err)
	}
	return out
}
