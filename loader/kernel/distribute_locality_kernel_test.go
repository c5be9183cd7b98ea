package kernel

import (
	"encoding/binary"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/shared"
	"github.com/loctree/loctree/shared/wire"
)

// distLocalityCase is issue 26 item 5's example (shared's
// distLocalityCase), shares worked by hand from Istio's applyLocalityWeights
// (istio/istio pilot/pkg/networking/core/loadbalancer/loadbalancer.go at
// b6787c126ec0: ceil(weight · W_L / ΣW) per matching locality) and Envoy's
// effectiveLocalityWeight (envoyproxy/envoy source/common/upstream/
// locality_wrr.cc at e8e02bb2: W · min(1, 1.4 · healthy/hosts)), not from
// loctree. A rule from r1 to r1/z1 70, r2 30; from r1/z1/s1:
//
//	r1/z1/s1: .1 healthy, .2 unhealthy: ceil(2·70/6) = 24 → 24·0.7 = 16.8
//	r1/z1/s2: .3 healthy, weight 4:     ceil(4·70/6) = 47 → 47
//	r2/z1/s1: .4 healthy:               30 → 30
//	r3/z1/s1: .5 healthy: in no target.
//
// .1 16.8/93.8, .3 47/93.8, .4 30/93.8. Weighing the target r1/z1 as a whole
// (before) gave .1 and .3 35 % each.
func distLocalityCase() loadsCase {
	w4, of, threshold := uint32(4), uint32(140), uint32(50)
	ep := func(addr, r, s string) shared.EndpointSpec {
		return shared.EndpointSpec{Address: addr, Locality: shared.Locality{"region": r, "zone": "z1", "subzone": s}}
	}
	spec := shared.ServiceSpec{Name: "distloc", VIP: "127.77.26.5:80",
		Spillover:  &shared.SpilloverSpec{OverprovisioningFactor: &of, PanicThreshold: &threshold},
		Distribute: []shared.DistributeSpec{{From: "r1", To: map[string]uint32{"r1/z1": 70, "r2": 30}}},
		Endpoints: []shared.EndpointSpec{ep("127.0.55.1:9155", "r1", "s1"), ep("127.0.55.2:9155", "r1", "s1"),
			ep("127.0.55.3:9155", "r1", "s2"), ep("127.0.55.4:9155", "r2", "s1"), ep("127.0.55.5:9155", "r3", "s1")}}
	spec.Endpoints[1].Healthy = boolp(false)
	spec.Endpoints[2].Weight = &w4
	return loadsCase{spec, []loadsEndpoint{
		{"127.0.55.1:9155", "r1", "z1/s1", "", 16.8 / 93.8 * 100},
		{"127.0.55.2:9155", "r1", "z1/s1", "unhealthy", 0},
		{"127.0.55.3:9155", "r1", "z1/s2", "", 47 / 93.8 * 100},
		{"127.0.55.4:9155", "r2", "z1/s1", "", 30 / 93.8 * 100},
		{"127.0.55.5:9155", "r3", "z1/s1", "", 0},
	}}
}

// TestConnectDistributePerLocality: real connects through the programs
// land on each endpoint as Istio's per-locality distribute weights and
// Envoy's per-locality health say (chi-square at p = 0.001; never on an
// endpoint without a share).
func TestConnectDistributePerLocality(t *testing.T) {
	kerneltest.RequireRoot(t)
	c := distLocalityCase()
	top := &shared.Topology{Services: []shared.ServiceSpec{c.spec}}
	install(t, top, shared.Locality{"region": "r1", "zone": "z1", "subzone": "s1"})
	seen := map[string]int{}
	for range 4000 {
		got, err := kerneltest.Ask(c.spec.VIP)
		if err != nil {
			t.Fatalf("%s: %v", c.spec.VIP, err)
		}
		seen[got]++
	}
	checkShares(t, c, seen)
}

// TestConnectDistributeRandomSpread: random services with distribute rules
// (policy random, prefix and deep patterns, every health state), one
// source: real connects spread over the endpoints as shared's locality
// level says (LocalityShares: Istio's per-locality weights times Envoy's
// per-locality health, held to the Istio+Envoy oracle in
// shared/distribute_locality_test.go), evenly inside a locality; in panic
// evenly over every target's endpoints. Chi-square per service at
// p ≈ 1e-6 (z = 4.75), no connect to an endpoint without a share.
func TestConnectDistributeRandomSpread(t *testing.T) {
	kerneltest.RequireRoot(t)
	rng := rand.New(rand.NewPCG(26, 5))
	top := distributeTopology(rng, 8)
	for i := range top.Services {
		top.Services[i].Policy = "random"
	}
	addrs := map[string]bool{}
	for _, a := range backendsOf(top) {
		addrs[a] = true
	}
	kerneltest.Backends(t, slices.Sorted(maps.Keys(addrs)))
	tree, err := shared.Build(top, shared.BuildOptions{Generation: 1})
	if err != nil {
		t.Fatal(err)
	}
	src := shared.Locality{"region": "region-1", "zone": "zone-1", "subzone": "subzone-2", "node": "node-1"}
	setup(t, tree, src)
	checked := 0
	for _, s := range tree.Services() {
		l := s.Loads(src)
		want := expectedDistributeShares(tree, s, &l)
		if len(want) == 0 {
			continue
		}
		checked++
		seen := map[string]int{}
		const connects = 1500
		for range connects {
			got, err := kerneltest.Ask(s.VIP().String())
			if err != nil {
				t.Fatalf("%s: %v", s.Name(), err)
			}
			seen[got]++
		}
		checkSpreadAgainst(t, s.Name(), want, seen, connects)
	}
	if checked < 4 {
		t.Fatalf("only %d services had traffic", checked)
	}
}

// expectedDistributeShares is each endpoint address's share of a source's
// traffic by shared's loads and locality level, random inside a locality.
func expectedDistributeShares(tree *shared.Tree, s *shared.Service, l *shared.Loads) map[string]float64 {
	out := map[string]float64{}
	if l.N == 0 {
		return out
	}
	even := func(sp shared.Span, share float64) {
		for i := sp.Lo; i < sp.Hi; i++ {
			out[tree.Endpoint(i).Addr.String()] += share / float64(sp.Len())
		}
	}
	h, d := float64(l.Healthy[0])/100, float64(l.Degraded[0])/100
	if l.InPanic(0) {
		for i := range l.NTargets {
			for _, sp := range l.TargetSpans(i) {
				even(sp, (h+d)*float64(sp.Len())/float64(l.Counts[0].Total))
			}
		}
		return out
	}
	if h+d == 0 {
		h = 1 // choosePriority's fallback: P0's healthy endpoints
	}
	for _, ls := range s.LocalityShares(l, 0) {
		even(ls.Eligible, h*ls.HealthyShare)
		even(ls.Degraded, d*ls.DegradedShare)
	}
	return out
}

// checkSpreadAgainst is a chi-square test of seen against want (shares
// summing to at most 1; the rest: no endpoint, which the kernel refuses).
func checkSpreadAgainst(t *testing.T, name string, want map[string]float64, seen map[string]int, n int) {
	t.Helper()
	chi2, df := 0.0, -1
	for addr, c := range seen {
		if want[addr] == 0 {
			t.Fatalf("%s: %d connects to %s, which has no share: %v, want %v", name, c, addr, seen, want)
		}
	}
	for addr, share := range want {
		if share == 0 {
			continue
		}
		e := share * float64(n)
		chi2 += (float64(seen[addr]) - e) * (float64(seen[addr]) - e) / e
		df++
	}
	k := float64(max(df, 1))
	a := 2 / (9 * k)
	if limit := k * math.Pow(1-a+4.75*math.Sqrt(a), 3); df > 0 && chi2 > limit {
		t.Fatalf("%s: chi-square %.1f > %.1f (df %d): %v, want %v", name, chi2, limit, df, seen, want)
	}
	t.Logf("%s: chi-square %.1f (df %d)", name, chi2, df)
}

// TestDistributeLocalityRecordsSparse: a rule block holds only the
// localities its rule can draw (those with a weight under it), and its
// record 2 locates them: the example's rule from r1 draws r1/z1/s1,
// r1/z1/s2 and r2/z1/s1 (3 eligible records, none degraded); a source no
// rule applies to draws all four localities. 7 records, where a block of
// every locality per rule would take 8.
func TestDistributeLocalityRecordsSparse(t *testing.T) {
	c := distLocalityCase()
	tree, err := shared.Build(&shared.Topology{Services: []shared.ServiceSpec{c.spec}}, shared.BuildOptions{Generation: 1})
	if err != nil {
		t.Fatal(err)
	}
	s := tree.Services()[0]
	if got := locLen(s); got != 7 {
		t.Fatalf("locality records %d, want 7 (3 for the rule, 4 for no rule)", got)
	}
	blocks := distRecords(s)
	for k, want := range [][3]uint32{{0, 3, 0}, {3, 4, 0}} {
		rec := blocks[(k*distStride+2)*wire.NodeRecordSize:]
		got := [3]uint32{binary.LittleEndian.Uint32(rec[wire.NLo:]), binary.LittleEndian.Uint32(rec[wire.NHi:]), binary.LittleEndian.Uint32(rec[wire.NFirstChild:])}
		if got != want {
			t.Fatalf("rule block %d record 2: offset %d, %d eligible, %d degraded; want %v", k, got[0], got[1], got[2], want)
		}
	}
}
