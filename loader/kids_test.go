package loader

import (
	"encoding/binary"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/loctree/loctree/internal/treetest"
	"github.com/loctree/loctree/shared"
)

// TestKidConstantsMatchHeader: the loader's child table constants are
// bpf/loctree.h's (which bpf2go does not export: defines leave no BTF).
func TestKidConstantsMatchHeader(t *testing.T) {
	h, err := os.ReadFile("../bpf/loctree.h")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]uint64{
		"LT_KID_PROBES": kidProbes, "LT_KID_EMPTY": uint64(kidEmpty), "LT_KID_MIX1": kidMix1, "LT_KID_MIX2": kidMix2,
	} {
		m := regexp.MustCompile(`(?m)^#define ` + name + `\s+(0x[0-9a-f]+|[0-9]+)(U|ULL)?\b`).FindSubmatch(h)
		if m == nil {
			t.Fatalf("no #define %s in loctree.h", name)
		}
		got, err := strconv.ParseUint(string(m[1]), 0, 64)
		if err != nil || got != want {
			t.Errorf("%s = %s in loctree.h, %#x in loader/kids.go", name, m[1], want)
		}
	}
}

// kidFind searches a child table as lt_kid_in does: from the key's home,
// at most kidProbes slots, stopping at a free one. It fails the test when a
// search would read past the table.
func kidFind(t *testing.T, k kids, first uint32, label uint64) (uint32, bool) {
	t.Helper()
	i := kidHome(first, label, k.slots)
	for p := range uint32(kidProbes) {
		if i+p >= k.len() {
			t.Fatalf("search for (%d, %#x) reads slot %d of a %d-slot table", first, label, i+p, k.len())
		}
		rec := k.records[int(i+p)*shared.NodeRecordSize:]
		f := binary.LittleEndian.Uint32(rec[8:])
		if f == kidEmpty {
			return 0, false
		}
		if f == first && binary.LittleEndian.Uint64(rec) == label {
			return binary.LittleEndian.Uint32(rec[12:]), true
		}
	}
	return 0, false
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
	out := []regionTree{{tree.Node, s.Root, s.Root + s.NodeCount, 0}}
	switch {
	case s.OverprovisioningFactor != 0:
		out = append(out, regionTree{tree.AuxNode, s.AuxRoot[0], s.AuxRoot[0] + s.AuxCount[0] + s.AuxCount[1], s.NodeCount})
	case s.NetworkRule:
		out = append(out, regionTree{tree.AuxNode, s.NetRoot, s.NetRoot + s.NetCount, s.NodeCount})
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
		for i := range tree.Services() {
			s := &tree.Services()[i]
			k, err := kidsOf(s, nodeRegion(tree, s))
			if err != nil {
				t.Fatal(err)
			}
			if k.slots > 0 && k.len() < k.slots {
				t.Fatalf("%s: table of %d slots has %d home slots", s.Name, k.len(), k.slots)
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
func checkKids(t *testing.T, k kids, rt regionTree, rng *rand.Rand) (found, missed int) {
	t.Helper()
	for p := rt.from; p < rt.to; p++ {
		n := rt.node(p)
		if n.ChildCount == 0 {
			continue
		}
		first := n.FirstChild - rt.from + rt.at
		labels := map[uint64]bool{}
		for c := n.FirstChild; c < n.FirstChild+n.ChildCount; c++ {
			want := c - rt.from + rt.at
			labels[rt.node(c).Label] = true
			got, ok := kidFind(t, k, first, rt.node(c).Label)
			if !ok || got != want {
				t.Fatalf("child %d of node %d (label %#x): found %d, %v; want %d", c, p, rt.node(c).Label, got, ok, want)
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
				t.Fatalf("node %d has no child labelled %#x, the table gives %d", p, l, got)
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
		keys := make([]kidKey, n)
		for i := range keys {
			keys[i] = kidKey{rng.Uint64(), uint32(rng.IntN(n)), uint32(i)}
		}
		table, ok := placeKids(keys, uint32(2*n))
		if !ok {
			t.Fatalf("%d keys: no key may sit %d slots past its home at 2 slots per key", n, kidProbes)
		}
		longest := uint32(0)
		for _, s := range table {
			longest = max(longest, s.dist+1)
		}
		t.Logf("%d keys: longest probe %d slots (bound %d)", n, longest, kidProbes)
	}
}
