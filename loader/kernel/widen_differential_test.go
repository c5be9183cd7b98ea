package kernel

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/loctree/loctree/bpf"
	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/shared"
)

// diffScopes and diffPool are the differential test's service: three
// levels, leaves of one and two endpoints, and a source in r1/z1/s1.
var (
	diffScopes = []string{"region", "zone", "subzone"}
	diffPool   = map[string][3]string{
		"127.0.26.11:9026": {"r1", "z1", "s1"}, "127.0.26.12:9026": {"r1", "z1", "s1"},
		"127.0.26.13:9026": {"r1", "z1", "s2"},
		"127.0.26.14:9026": {"r1", "z2", "s1"}, "127.0.26.15:9026": {"r1", "z2", "s1"},
		"127.0.26.16:9026": {"r2", "z3", "s1"},
	}
	diffSource = shared.Locality{"region": "r1", "zone": "z1", "subzone": "s1"}
)

func diffTopology(high, low uint32) *shared.Topology {
	s := shared.ServiceSpec{Name: "diff", VIP: "127.77.26.1:80", Scopes: diffScopes,
		LoadAware: &shared.LoadAwareSpec{High: &high, Low: &low}}
	for _, a := range slices.Sorted(mapKeys(diffPool)) {
		l := diffPool[a]
		s.Endpoints = append(s.Endpoints, shared.EndpointSpec{Address: a,
			Locality: shared.Locality{"region": l[0], "zone": l[1], "subzone": l[2]}})
	}
	return &shared.Topology{Services: []shared.ServiceSpec{s}}
}

// TestLoadAwareKernelMatchesPicker: on random sequences of connections
// opened and closed from the source, the kernel widens as shared's Picker
// does (Widen, with Inc and Done on the same endpoints: the rule of
// docs/TOPOLOGY.md as the Go library implements it): before every connect
// the Picker's widened range is computed, and the kernel's connection must
// land in it; the kernel's wide flags of the nodes that connect evaluated
// must be the states the Picker's walk implies (wide below the range's
// depth, narrow at it when the walk stopped above failover_limit's rank);
// and every node's count must be the connections the test holds to its
// endpoints, counted here from the endpoints' localities.
func TestLoadAwareKernelMatchesPicker(t *testing.T) {
	kerneltest.RequireRoot(t)
	kerneltest.Backends(t, slices.Sorted(mapKeys(diffPool)))
	for _, band := range [][2]uint32{{2, 1}, {3, 2}} {
		t.Run(fmt.Sprintf("high=%d,low=%d", band[0], band[1]), func(t *testing.T) {
			diffRun(t, band[0], band[1], rand.New(rand.NewPCG(uint64(band[0]), uint64(band[1]))))
		})
	}
}

func diffRun(t *testing.T, high, low uint32, rng *rand.Rand) {
	tree := mustBuild(t, diffTopology(high, low), 1)
	in := setup(t, tree, diffSource)
	svc, _ := tree.Service("diff")
	picker := shared.NewPicker(tree, shared.PickerOptions{Seed: 1})
	index := map[string]uint32{}
	for i := svc.FirstEndpoint(); i < svc.FirstEndpoint()+svc.EndpointCount(); i++ {
		index[tree.Endpoint(i).Addr.String()] = i
	}
	r := svc.Lookup(diffSource)
	h := held{}
	defer h.closeAll()
	wide := map[int]uint8{} // by depth on the source's path: the state the Picker's walks imply
	depths := map[int]int{} // connects by the depth of their candidates
	for step := range 300 {
		n := 0
		for _, cs := range h {
			n += len(cs)
		}
		if n > 0 && (n >= 24 || rng.IntN(5) < 2) {
			var open []string
			for b, cs := range h {
				for range cs {
					open = append(open, b)
				}
			}
			slices.Sort(open)
			b := open[rng.IntN(len(open))]
			h.close(t, b)
			picker.Done(index[b])
			continue
		}
		w := picker.Widen(svc, r)
		depths[w.Depth]++
		for d := r.Depth; d > w.Depth; d-- {
			wide[d] = 1
		}
		if w.Depth > svc.MinRank() {
			wide[w.Depth] = 0
		}
		b := h.open(t, svc.VIP().String())
		if i := index[b]; i < w.Lo || i >= w.Hi {
			t.Fatalf("step %d, %d open: the kernel sent a connect to %s (endpoint %d); the Picker's candidates are [%d, %d) at depth %d",
				step, n, b, i, w.Lo, w.Hi, w.Depth)
		}
		picker.Inc(index[b])
		for d := 1; d <= r.Depth; d++ {
			path := []string{diffSource["region"], diffSource["zone"], diffSource["subzone"]}[:d]
			if got := diffNode(t, in, path).Wide; got != wide[d] {
				t.Fatalf("step %d, %d open: the kernel's %v is wide=%d, the Picker's walk implies %d", step, n, path, got, wide[d])
			}
		}
		diffCounts(t, in, h, step)
	}
	if len(depths) != r.Depth+1 {
		t.Fatalf("connects by candidate depth %v: the sequence did not widen to every level", depths)
	}
	t.Logf("connects by candidate depth: %v", depths)
}

// diffNode is the kernel's state of the node at path (scope values from
// the region down).
func diffNode(t *testing.T, in *Installer, path []string) bpf.WidenVal {
	t.Helper()
	k := bpf.WidenKey{Svc: max(shared.Label("diff"), 1)}
	for i, v := range path {
		k.Path = widenStep(k.Path, shared.Label(diffScopes[i]), shared.Label(v))
	}
	var v bpf.WidenVal
	if err := in.k.objs.LtWiden.Lookup(&k, &v); err != nil {
		t.Fatalf("%v: %v", path, err)
	}
	return v
}

// diffCounts checks every node's count against the held connections to
// the endpoints whose locality starts with the node's path.
func diffCounts(t *testing.T, in *Installer, h held, step int) {
	t.Helper()
	want := map[[3]string]int64{}
	for b, cs := range h {
		l := diffPool[b]
		for d := 1; d <= 3; d++ {
			var p [3]string
			copy(p[:d], l[:d])
			want[p] += int64(len(cs))
		}
	}
	for _, l := range diffPool {
		for d := 1; d <= 3; d++ {
			var p [3]string
			copy(p[:d], l[:d])
			if got := diffNode(t, in, p[:d]).Count; got != want[p] {
				t.Fatalf("step %d: %v counts %d, the test holds %d connections to its endpoints", step, p[:d], got, want[p])
			}
		}
	}
}
