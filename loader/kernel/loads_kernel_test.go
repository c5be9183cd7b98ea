package kernel

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/loctree/loctree/bpf"
	bpftest "github.com/loctree/loctree/bpf/tests"
	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/internal/testing/treetest"
	"github.com/loctree/loctree/shared"
)

// loadsTopology is a random topology for the priority-load differential
// test: services with spillover (random overprovisioning factor and panic
// threshold), healthy, degraded and unhealthy endpoints in proportions that
// vary per service (so some priorities are in panic, some have no health),
// failover rules between the regions, failover_limit, every policy, and
// some services without spillover beside them.
func loadsTopology(rng *rand.Rand, services int) *shared.Topology {
	top := &shared.Topology{}
	for i := range services {
		top.Services = append(top.Services, loadsService(rng, i))
	}
	return top
}

var loadsPolicies = []string{"random", "weighted", "round_robin", "least_request", "least_connections", "consistent_hash"}

func loadsService(rng *rand.Rand, i int) shared.ServiceSpec {
	levels := 1 + rng.IntN(4)
	if rng.IntN(10) == 0 {
		levels = shared.MaxLevels
	}
	scopes, netFirst := treetest.Scopes, rng.IntN(4) == 0
	switch {
	case netFirst: // the network rule: Istio's priorities across networks (issue 26 items 3, 4)
		scopes = networkFirstScopes
	case rng.IntN(3) == 0: // a cluster first: the copies by the first scope (network_rule 4 with failover, 3 without)
		scopes, levels = clusterFirstScopes, max(levels, 2+rng.IntN(4)) // node after subzone, which failover rules do not rank
	case rng.IntN(3) == 0: // two or three scopes before region: classes before the locality (format 8)
		scopes = classScopes[rng.IntN(len(classScopes))]
		netFirst = true // and no failover_limit below region, which failover rules refuse
		levels = max(levels, slices.Index(scopes, "region")+1+rng.IntN(3))
	}
	spec := shared.ServiceSpec{Name: fmt.Sprintf("svc-%d", i), Scopes: scopes[:levels], VIP: treetest.VIP(i, false),
		Policy: loadsPolicies[rng.IntN(len(loadsPolicies))]}
	if rng.IntN(6) > 0 {
		of := []uint32{140, 140, 100, 200, 50, 1, 1000, 65535, uint32(1 + rng.IntN(300))}[rng.IntN(9)]
		threshold := []uint32{50, 50, 0, 100, 30, 75, uint32(rng.IntN(101))}[rng.IntN(7)]
		spec.Spillover = &shared.SpilloverSpec{OverprovisioningFactor: &of, PanicThreshold: &threshold}
		if slices.Contains(spec.Scopes, "region") {
			spec.Failover = loadsFailover(rng)
		}
	}
	if rng.IntN(10) == 0 {
		spec.Health = "allow_all"
	}
	if rng.IntN(3) == 0 && !netFirst { // a limit turns the rule off, and failover then needs region first
		spec.FailoverLimit = spec.Scopes[rng.IntN(levels)]
	}
	unhealthy, degraded := rng.IntN(4), rng.IntN(4) // of 8
	for j := range rng.IntN(30) {
		e := shared.EndpointSpec{Address: fmt.Sprintf("127.0.%d.%d:%d", j/250, j%250+1, 8000+rng.IntN(3)),
			Locality: treetest.Source(rng, spec.Scopes, 3)}
		switch x := rng.IntN(8); {
		case x < unhealthy:
			e.Healthy = boolp(false)
		case x < unhealthy+degraded && spec.Health == "" && spec.Spillover != nil:
			e.Degraded = true
		}
		if j > 0 && rng.IntN(4) == 0 {
			e.Weight = u32(uint32(rng.IntN(5)))
		}
		spec.Endpoints = append(spec.Endpoints, e)
	}
	return spec
}

// classScopes have two or three scopes before region (docs/FORMAT.md,
// "Classes before the locality"): network first (the network rule's
// classes on both sides of its ranked copies), or another label.
var classScopes = [][]string{
	{"network", "cluster", "region", "zone", "subzone", "node", "rack", "topology.istio.io/cluster"},
	{"cluster", "rack", "region", "zone", "subzone", "node", "network", "topology.istio.io/cluster"},
	{"cluster", "rack", "network", "region", "zone", "subzone", "node", "topology.istio.io/cluster"},
}

// networkFirstScopes are scopes with network first, region after it.
var networkFirstScopes = []string{"network", "region", "zone", "subzone", "node", "cluster", "rack", "topology.istio.io/cluster"}

// clusterFirstScopes are scopes with cluster first, region after it.
var clusterFirstScopes = []string{"cluster", "region", "zone", "subzone", "node", "network", "rack", "topology.istio.io/cluster"}

// loadsFailover are random failover rules between the regions the
// endpoints and sources draw from (region-1, region-2), and one that
// exists nowhere.
func loadsFailover(rng *rand.Rand) []shared.FailoverSpec {
	if rng.IntN(2) == 0 {
		return nil
	}
	var out []shared.FailoverSpec
	for from := 1; from <= 3; from++ {
		if rng.IntN(3) > 0 {
			out = append(out, shared.FailoverSpec{From: fmt.Sprintf("region-%d", from), To: fmt.Sprintf("region-%d", 1+(from+rng.IntN(2))%3)})
		}
	}
	return out
}

// kernelLoads runs the kernel's priority load (bpf/lib/priority.h) for a
// service and a source through the test-only program.
func (kl *kernelLoads) run(t testing.TB, fe bpf.Frontend, labels [shared.MaxLevels]uint64) bpftest.LoadsOut {
	t.Helper()
	if _, err := kl.objs.LtTestLoads.Run(&ebpf.RunOptions{Context: bpftest.NewArgs(fe, labels, 0)}); err != nil {
		t.Fatalf("run test program: %v", err)
	}
	var out bpftest.LoadsOut
	if err := kl.objs.LtTestLoadsRes.Lookup(uint32(0), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

type kernelLoads struct{ objs *bpftest.Objects }

// TestKernelLoadsMatchGo is the differential test of the priority load: for
// random topologies and sources (at least 20,000 pairs with a priority
// load), the kernel computes the same priorities (rank, failover split,
// healthy/degraded/total counts), the same healthy and degraded loads, the
// same panic flags and the same spans per priority and set as
// shared.Service.Loads, and its pick lies in one of the priorities' spans.
// Trees are applied over each other, so updates are covered too.
func TestKernelLoadsMatchGo(t *testing.T) {
	kerneltest.RequireRoot(t)
	// Room for a tree and the one before it while its regions wait out
	// the grace period (longer under load): services with classes before
	// the locality hold copies per value of those scopes, up to ~5,500
	// nodes each.
	in, plain := openKernelLookup(t, Capacity{Services: 64, Nodes: 1 << 16, Endpoints: 1 << 16})
	kl := &kernelLoads{objs: plain.objs}
	rng := rand.New(rand.NewPCG(31, 32))
	pairs, seen := 0, map[string]int{}
	for it := 0; pairs < 20000; it++ {
		tree := installBuilt(t, in, loadsTopology(rng, 1+rng.IntN(8)), uint64(it+1))
		for _, s := range tree.Services() {
			if s.OverprovisioningFactor() == 0 { // the plain lookup, with its failover_limit
				for range 4 {
					compare(t, plain, in, s, treetest.Source(rng, s.Scopes(), 4))
				}
				continue
			}
			for range 12 {
				labels := sourceLabels(s, treetest.Source(rng, treetest.Scopes, 4))
				want := loadsOf(s, labels)
				compareLoads(t, s, labels, &want, kl.run(t, FrontendOf(s.VIP()), labels), seen)
				pairs++
			}
		}
	}
	for _, c := range []string{"panic", "total panic", "degraded load", "failover split", "no candidate", "several priorities", "beyond failover_limit", "other networks",
		"other clusters ranked", "other clusters merged", "classes before the locality"} {
		if seen[c] == 0 {
			t.Errorf("no pair had %s: the generator misses a case (%v)", c, seen)
		}
	}
	t.Logf("%d (tree, source) pairs agree; cases %v", pairs, seen)
}

func loadsOf(s *shared.Service, labels [shared.MaxLevels]uint64) shared.Loads {
	var l shared.Loads
	s.LoadsLabels(labels[:s.Levels()], &l)
	return l
}

func compareLoads(t *testing.T, s *shared.Service, labels [shared.MaxLevels]uint64, want *shared.Loads, got bpftest.LoadsOut, seen map[string]int) {
	t.Helper()
	where := fmt.Sprintf("%s (of %d, panic %d, %d rules, %s) source %x", s.Name(), s.OverprovisioningFactor(), s.PanicThreshold(), len(s.Failover()), s.Policy(), labels[:s.Levels()])
	if want.N == 0 {
		seen["no candidate"]++
		if s.MinRank() > 0 {
			seen["beyond failover_limit"]++
		}
		if got.Status != bpf.StatNoCandidate {
			t.Fatalf("%s: Go has no priority, kernel status %d with %d", where, got.Status, got.N)
		}
		return
	}
	if int(got.N) != want.N {
		t.Fatalf("%s: kernel %d priorities, Go %d", where, got.N, want.N)
	}
	allPanic := want.N > 0
	for p := range want.N {
		k := kernelPriority(&got, p)
		w := goPriority(want, p)
		if k != w {
			t.Fatalf("%s: priority %d:\nkernel %+v\nGo     %+v", where, p, k, w)
		}
		allPanic = allPanic && w.Panic
		if w.Panic {
			seen["panic"]++
		}
		if w.Degraded > 0 {
			seen["degraded load"]++
		}
		if w.Failover != 0 {
			seen["failover split"]++
		}
		switch {
		case w.Other && s.ClassesBeforeLocality() && w.Group > 1:
			seen["classes before the locality"]++
		case w.Other && s.Scopes()[0] == "network":
			seen["other networks"]++
		case w.Other && s.OtherValuesMerged():
			seen["other clusters merged"]++
		case w.Other:
			seen["other clusters ranked"]++
		}
	}
	if allPanic {
		seen["total panic"]++
	}
	if want.N > 1 {
		seen["several priorities"]++
	}
	if got.Status == bpf.StatRedirect && !inSpans(&got, got.Pick) {
		t.Fatalf("%s: kernel picked %d outside every priority", where, got.Pick)
	}
}

// priority is one priority as both sides report it, spans as endpoint
// record indices.
type priority struct {
	Rank, Failover    uint8
	Other             bool
	Group             uint8
	Counts            shared.PriorityCounts
	Healthy, Degraded uint8
	Panic             bool
	Spans             [3][3]shared.Span
}

func goPriority(l *shared.Loads, p int) priority {
	return priority{Rank: l.Rank[p], Failover: l.Failover[p], Other: l.Other(p), Group: l.Group[p], Counts: l.Counts[p], Healthy: l.Healthy[p], Degraded: l.Degraded[p],
		Panic: l.InPanic(p), Spans: l.Spans(p)}
}

func kernelPriority(o *bpftest.LoadsOut, p int) priority {
	k := priority{Rank: o.Rank[p], Failover: o.Kind[p], Other: o.Other[p] != 0, Group: o.Other[p], Healthy: o.Lh[p], Degraded: o.Ld[p], Panic: o.Panic&(1<<p) != 0,
		Counts: shared.PriorityCounts{Healthy: o.Healthy[p], Degraded: o.Degraded[p], Total: o.Total[p]}}
	for set := range 3 {
		for i := range 3 {
			sp := o.Spans[p][set][i]
			k.Spans[set][i] = shared.Span{Lo: sp.Lo - o.EpDelta, Hi: sp.Hi - o.EpDelta}
		}
	}
	return k
}

func inSpans(o *bpftest.LoadsOut, idx uint32) bool {
	for p := range o.N {
		for set := range 3 {
			for _, sp := range o.Spans[p][set] {
				if idx >= sp.Lo && idx < sp.Hi {
					return true
				}
			}
		}
	}
	return false
}

// TestApplyServicesCountsEligible: a priority-load service has all its
// endpoints installed, yet ApplyServices reports its eligible endpoints, as
// Apply does (the loctree_endpoints gauge).
func TestApplyServicesCountsEligible(t *testing.T) {
	kerneltest.RequireRoot(t)
	in, err := Open(Config{Capacity: Capacity{Services: 8, Nodes: 1024, Endpoints: 1024}})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	top := &shared.Topology{Services: []shared.ServiceSpec{loadsCases()[0].spec}} // 5 eligible of 8
	full, err := in.Apply(mustBuild(t, top, 1))
	if err != nil {
		t.Fatal(err)
	}
	top.Services[0].Endpoints[0].Weight = u32(2)
	part, err := in.ApplyServices(mustBuild(t, top, 2), []string{top.Services[0].Name})
	if err != nil {
		t.Fatal(err)
	}
	if full.Endpoints != 5 || part.Endpoints != 5 || part.Rewritten != 1 {
		t.Fatalf("Apply reports %d endpoints, ApplyServices %d (%d rewritten); want 5 eligible each", full.Endpoints, part.Endpoints, part.Rewritten)
	}
}
