package kernel

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/loctree/loctree/bpf"
	bpftest "github.com/loctree/loctree/bpf/tests"
	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/internal/testing/treetest"
	"github.com/loctree/loctree/shared"
)

// distributePatterns are the from and to patterns the random rules draw
// from: over the values treetest.Source gives (scope-1, scope-2; scope-3
// exists nowhere), at every depth, with and without a trailing "/*".
var distributePatterns = []string{
	"region-1", "region-2", "region-3", "region-1/*", "region-1/zone-1", "region-1/zone-2", "region-2/zone-1/*",
	"region-2/zone-2", "region-1/zone-1/subzone-1", "region-1/zone-1/subzone-2", "region-2/zone-2/subzone-1",
}

// distributeService is loadsService with one to three distribute rules
// (Istio's localityLbSetting.distribute) instead of failover.
func distributeService(rng *rand.Rand, i int) shared.ServiceSpec {
	spec := loadsService(rng, i)
	levels := 3 + rng.IntN(2)
	spec.Scopes = treetest.Scopes[:levels]
	for j := range spec.Endpoints {
		spec.Endpoints[j].Locality = treetest.Source(rng, spec.Scopes, 3)
	}
	of, threshold := []uint32{140, 100, 200, 50, 1000}[rng.IntN(5)], []uint32{50, 0, 30, 80, 100}[rng.IntN(5)]
	spec.Spillover = &shared.SpilloverSpec{OverprovisioningFactor: &of, PanicThreshold: &threshold}
	spec.Failover, spec.FailoverLimit, spec.Distribute = nil, "", nil
	froms := append([]string{"*"}, distributePatterns...)
	rng.Shuffle(len(froms), func(a, b int) { froms[a], froms[b] = froms[b], froms[a] })
	for _, from := range froms[:1+rng.IntN(3)] {
		spec.Distribute = append(spec.Distribute, shared.DistributeSpec{From: from, To: distributeTargets(rng)})
	}
	return spec
}

// distributeTargets are 1..4 patterns with weights summing to 100 (they
// may overlap: Build rejects those, and the caller draws again).
func distributeTargets(rng *rand.Rand) map[string]uint32 {
	pool := slices.Clone(distributePatterns)
	rng.Shuffle(len(pool), func(a, b int) { pool[a], pool[b] = pool[b], pool[a] })
	n := 1 + rng.IntN(4)
	to, left := map[string]uint32{}, uint32(100)
	for k, p := range pool[:n] {
		w := left
		if k < n-1 {
			w = 1 + uint32(rng.IntN(int(left)-(n-1-k)))
		}
		to[p] = w
		left -= w
	}
	return to
}

// distributeTopology is up to n services with distribute rules, each drawn
// again until Build accepts it alone (Istio's validation: no overlapping
// froms or tos).
func distributeTopology(rng *rand.Rand, n int) *shared.Topology {
	top := &shared.Topology{}
	for i := range n {
		for {
			spec := distributeService(rng, i)
			_, err := shared.Build(&shared.Topology{Services: []shared.ServiceSpec{spec}}, shared.BuildOptions{})
			if err == nil {
				top.Services = append(top.Services, spec)
				break
			}
			if !errors.Is(err, shared.ErrInvalidTopology) {
				panic(err)
			}
		}
	}
	return top
}

// TestKernelDistributeMatchesGo is the differential test of distribute in
// the kernel (docs/FORMAT.md "Distribute"): for at least 20,000 random
// (tree, source) pairs of services with distribute rules, the kernel
// applies the same rule as shared.Service.LoadsLabels (Istio's
// applyLocalityWeights, pilot/pkg/networking/core/loadbalancer/loadbalancer.go:
// the first rule whose from matches the source), with the same one
// priority's counts, loads and panic; its pick draws from exactly the spans
// shared's PickLoads would for the same availability and target: in panic
// every target's endpoints (Envoy's hostSourceToUse), else one target with
// a non-zero effective weight for that availability, or every target's
// endpoints of it when all are zero (Envoy's rebuildLocalityScheduler: no
// scheduler); and the pick lies in them.
func TestKernelDistributeMatchesGo(t *testing.T) {
	kerneltest.RequireRoot(t)
	in, plain := openKernelLookup(t, Capacity{Services: 64, Nodes: 1 << 16, Endpoints: 1 << 14})
	kl := &kernelLoads{objs: plain.objs}
	rng := rand.New(rand.NewPCG(61, 62))
	pairs, seen := 0, map[string]int{}
	for it := 0; pairs < 20000; it++ {
		tree := installBuilt(t, in, distributeTopology(rng, 1+rng.IntN(6)), uint64(it+1))
		for _, s := range tree.Services() {
			for range 12 {
				labels := sourceLabels(s, treetest.Source(rng, treetest.Scopes, 4))
				want := loadsOf(s, labels)
				compareDistribute(t, s, labels, &want, kl.run(t, FrontendOf(s.VIP()), labels), seen)
				pairs++
			}
		}
	}
	for _, c := range []string{"rule", "no rule", "panic", "degraded", "one target", "no weight", "no candidate"} {
		if seen[c] == 0 {
			t.Errorf("no pair had %s: the generator misses a case (%v)", c, seen)
		}
	}
	t.Logf("%d (tree, source) pairs agree; cases %v", pairs, seen)
}

func compareDistribute(t *testing.T, s *shared.Service, labels [shared.MaxLevels]uint64, want *shared.Loads, got bpftest.LoadsOut, seen map[string]int) {
	t.Helper()
	where := fmt.Sprintf("%s (of %d, panic %d, distribute %v, %s) source %x", s.Name(), s.OverprovisioningFactor(), s.PanicThreshold(), s.Distribute(), s.Policy(), labels[:s.Levels()])
	if want.N == 0 {
		seen["no candidate"]++
		if got.Status != bpf.StatNoCandidate {
			t.Fatalf("%s: Go has no priority, kernel status %d", where, got.Status)
		}
		return
	}
	if got.Status != bpf.StatRedirect && got.Status != bpf.StatNoCandidate {
		t.Fatalf("%s: kernel status %d, Go has a priority", where, got.Status)
	}
	if int(got.Rule) != want.Rule {
		t.Fatalf("%s: kernel applied rule %d, Go %d (0: none)", where, got.Rule, want.Rule)
	}
	seen[map[bool]string{true: "rule", false: "no rule"}[want.Rule > 0]]++
	k := priority{Healthy: got.Lh[0], Degraded: got.Ld[0], Panic: got.Panic&1 != 0,
		Counts: shared.PriorityCounts{Healthy: got.Healthy[0], Degraded: got.Degraded[0], Total: got.Total[0]}}
	w := priority{Healthy: want.Healthy[0], Degraded: want.Degraded[0], Panic: want.InPanic(0), Counts: want.Counts[0]}
	if got.N != 1 || k != w {
		t.Fatalf("%s: kernel %d priorities %+v, Go 1 %+v", where, got.N, k, w)
	}
	var drawn []shared.Span
	for _, sp := range got.PickSpans {
		if sp.Hi > sp.Lo {
			drawn = append(drawn, shared.Span{Lo: sp.Lo - got.EpDelta, Hi: sp.Hi - got.EpDelta})
		}
	}
	set := 0
	if got.Deg != 0 {
		set, seen["degraded"] = 1, seen["degraded"]+1
	}
	var expect []shared.Span
	switch {
	case w.Panic:
		seen["panic"]++
		expect = targetSpans(want, -1, 3)
	case got.Target >= 0:
		seen["one target"]++
		if h, d := want.TargetWeights(int(got.Target)); []uint64{h, d}[set] == 0 {
			t.Fatalf("%s: kernel drew target %d of effective weight 0 (set %d)", where, got.Target, set)
		}
		expect = targetSpans(want, int(got.Target), set)
	default:
		seen["no weight"]++
		for i := range want.NTargets {
			if h, d := want.TargetWeights(i); []uint64{h, d}[set] != 0 {
				t.Fatalf("%s: kernel took every target's endpoints, but target %d has weight (set %d)", where, i, set)
			}
		}
		expect = targetSpans(want, -1, set)
	}
	if got.Status == bpf.StatNoCandidate { // the drawn set is empty: Go's PickLoads has no host either
		seen["empty set"]++
		if len(expect) > 0 {
			t.Fatalf("%s: kernel found no candidate, Go would draw from %v", where, expect)
		}
		return
	}
	if !slices.Equal(drawn, expect) {
		t.Fatalf("%s: kernel drew from %v (target %d, set %d), Go's would be %v", where, drawn, got.Target, set, expect)
	}
	if !slices.ContainsFunc(drawn, func(sp shared.Span) bool { return got.Pick-got.EpDelta >= sp.Lo && got.Pick-got.EpDelta < sp.Hi }) {
		t.Fatalf("%s: kernel picked %d outside %v", where, got.Pick-got.EpDelta, drawn)
	}
}

// targetSpans are the non-empty spans of target i (every target: -1) in
// set (every set: 3), in target then set order.
func targetSpans(l *shared.Loads, i, set int) []shared.Span {
	var out []shared.Span
	for k := range l.NTargets {
		if i >= 0 && k != i {
			continue
		}
		for j, sp := range l.TargetSpans(k) {
			if (set == 3 || j == set) && sp.Hi > sp.Lo {
				out = append(out, sp)
			}
		}
	}
	return out
}
