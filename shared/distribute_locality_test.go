package shared

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
)

// Issue 26 item 5: distribute per locality, not per target. The oracle is
// distribute_oracle_test.go's transcription of Istio's applyLocalityWeights
// (istio/istio pilot/pkg/networking/core/loadbalancer/loadbalancer.go at
// b6787c126ec0, unchanged since 86c9f01fd735: each to pattern's matching
// localities get ceil(weight · W_L / ΣW), W_L the sum of the locality's
// endpoint weights) and of Envoy's effectiveLocalityWeight (envoyproxy/envoy
// source/common/upstream/locality_wrr.cc at e8e02bb2: the locality's weight
// · min(1, factor/100 · eligible/hosts)), extended here to the share of each
// endpoint when the policy spreads evenly inside a locality (random).

// distributeEndpointOracle is the share (0..1) of the source's traffic each
// endpoint address gets under Istio's distribute and Envoy's locality
// weighted LB: the priority's healthy (degraded) load over the kept
// localities by their healthy (degraded) effective weights, then evenly
// over the locality's healthy (degraded) hosts; in panic the load over all
// the kept hosts evenly (hostSourceToUse: AllHosts).
func distributeEndpointOracle(spec *ServiceSpec, src Locality, of, threshold uint32) map[string]float64 {
	locs := oracleLocalities(spec)
	keep := applyLocalityWeightsOracle(locs, spec.Distribute, src)
	var p0 envoyHostSet
	for i := range locs {
		if keep[i] {
			p0.hosts, p0.healthy, p0.degraded = p0.hosts+locs[i].hosts, p0.healthy+locs[i].healthy, p0.degraded+locs[i].deg
		}
	}
	out := map[string]float64{}
	if p0.hosts == 0 {
		return out
	}
	hl, dl, panic := envoyLoads([]envoyHostSet{p0}, of, threshold)
	if hl[0]+dl[0] == 0 && !panic[0] { // choosePriority's fallback: P0's healthy hosts
		hl[0] = 100
	}
	healthy, degraded := map[string]float64{}, map[string]float64{}
	if !panic[0] {
		spreadOracle(healthy, locs, keep, float64(hl[0])/100, of, func(l *istioLocality) int { return l.healthy })
		spreadOracle(degraded, locs, keep, float64(dl[0])/100, of, func(l *istioLocality) int { return l.deg })
	}
	for _, e := range spec.Endpoints {
		key := e.Locality["region"] + "/" + e.Locality["zone"] + "/" + e.Locality["subzone"]
		i := oracleLocalityIndex(locs, key)
		if !keep[i] {
			continue
		}
		ap := netip.MustParseAddrPort(e.Address)
		addr := netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String()
		switch state := endpointState(spec, &e); {
		case panic[0]:
			out[addr] += float64(hl[0]+dl[0]) / 100 / float64(p0.hosts)
		case state == 0:
			out[addr] += healthy[key] / float64(locs[i].healthy)
		case state == 1:
			out[addr] += degraded[key] / float64(locs[i].deg)
		}
	}
	return out
}

// endpointState is 0 healthy, 1 degraded, 2 unhealthy, as Envoy counts.
func endpointState(spec *ServiceSpec, e *EndpointSpec) int {
	switch {
	case spec.Health == "allow_all":
		return 0
	case e.Healthy != nil && !*e.Healthy:
		return 2
	case e.Degraded:
		return 1
	}
	return 0
}

func oracleLocalityIndex(locs []istioLocality, key string) int {
	for i := range locs {
		if locs[i].key() == key {
			return i
		}
	}
	return -1
}

// TestIstioDistributeVector is istio/istio's own vector,
// pilot/pkg/networking/core/loadbalancer/loadbalancer_test.go
// TestApplyLocalitySetting "Distribute" / "distribution between subzones"
// (at 86c9f01fd735; the file's buildFakeCluster: seven localities without
// endpoints weights, so each weighs 1, two of them region1/zone1/subzone1):
// from region1/zone1/subzone1 to subzone1 80, subzone2 15, subzone3 5, the
// weights are 40, 40, 15, 5 and the other three lose their endpoints. The
// oracle reproduces it; then loctree, with one healthy endpoint per Istio
// locality, gives each endpoint its locality's share (80 % over subzone1's
// two, 15 %, 5 %) per locality and per pick.
func TestIstioDistributeVector(t *testing.T) {
	keys := []string{"region1/zone1/subzone1", "region1/zone1/subzone1", "region1/zone1/subzone2", "region1/zone1/subzone3",
		"region1/zone2/", "region2//", "region3//"}
	var locs []istioLocality
	for _, k := range keys {
		p := strings.Split(k, "/")
		locs = append(locs, istioLocality{region: p[0], zone: p[1], subzone: p[2], weight: 1, hosts: 1, healthy: 1})
	}
	rule := []DistributeSpec{{From: "region1/zone1/subzone1", To: map[string]uint32{
		"region1/zone1/subzone1": 80, "region1/zone1/subzone2": 15, "region1/zone1/subzone3": 5}}}
	src := Locality{"region": "region1", "zone": "zone1", "subzone": "subzone1"}
	keep := applyLocalityWeightsOracle(locs, rule, src)
	for i, want := range []uint32{40, 40, 15, 5, 0, 0, 0} {
		if got := map[bool]uint32{true: locs[i].weight, false: 0}[keep[i]]; got != want {
			t.Fatalf("oracle: locality %d (%s) weight %d, Istio's test %d", i, keys[i], got, want)
		}
	}
	spec := ServiceSpec{Name: "istio", Spillover: &SpilloverSpec{}, Distribute: rule}
	for i, k := range keys {
		p := strings.Split(k, "/")
		spec.Endpoints = append(spec.Endpoints, EndpointSpec{Address: fmt.Sprintf("127.0.5.%d:80", i+1),
			Locality: Locality{"region": p[0], "zone": p[1], "subzone": p[2]}})
	}
	want := map[string]float64{"127.0.5.1:80": 0.4, "127.0.5.2:80": 0.4, "127.0.5.3:80": 0.15, "127.0.5.4:80": 0.05}
	checkEndpointShares(t, &spec, src, want)
}

// distLocalityCase is issue 26 item 5's example, worked by hand (the same
// numbers as filter/, loader/kernel/ and e2e/testdata/spill.yaml use):
// scopes [region, zone, subzone], spillover {}, a rule from r1 to r1/z1 70,
// r2 30.
//
//	r1/z1/s1: .1 healthy, .2 unhealthy, W 2 → ceil(2·70/6) = 24
//	r1/z1/s2: .3 healthy of weight 4, W 4 → ceil(4·70/6) = 47
//	r2/z1/s1: .4 healthy, W 1 → ceil(1·30/1) = 30
//	r3/z1/s1: .5 healthy: no target, no endpoint.
//
// The priority: 3 healthy of 4, health min(100, 140·3/4) = 100. Effective
// weights: s1 24·min(1, 1.4·1/2) = 16.8, s2 47, r2 30 (sum 93.8): .1
// 17.91 %, .3 50.11 %, .4 31.98 %. Per target (before): r1/z1 70 over .1
// and .3 (35 % each), .4 30 %. From r9 no rule applies: every locality
// keeps W: 1.4, 4, 1, 1 (sum 7.4): .1 18.92 %, .3 54.05 %, .4 and .5
// 13.51 %; per target (before) 25 % each.
func distLocalityCase(prefix string) ServiceSpec {
	no, w4 := false, uint32(4)
	loc := func(r, s string) Locality { return Locality{"region": r, "zone": "z1", "subzone": s} }
	return ServiceSpec{Name: "distloc", Spillover: &SpilloverSpec{},
		Distribute: []DistributeSpec{{From: "r1", To: map[string]uint32{"r1/z1": 70, "r2": 30}}},
		Endpoints: []EndpointSpec{
			{Address: prefix + ".1:80", Locality: loc("r1", "s1")},
			{Address: prefix + ".2:80", Locality: loc("r1", "s1"), Healthy: &no},
			{Address: prefix + ".3:80", Locality: loc("r1", "s2"), Weight: &w4},
			{Address: prefix + ".4:80", Locality: loc("r2", "s1")},
			{Address: prefix + ".5:80", Locality: loc("r3", "s1")},
		}}
}

func TestDistributePerLocalityExample(t *testing.T) {
	spec := distLocalityCase("127.0.55")
	cases := []struct {
		src  Locality
		want map[string]float64
	}{
		{Locality{"region": "r1", "zone": "z1", "subzone": "s1"},
			map[string]float64{"127.0.55.1:80": 16.8 / 93.8, "127.0.55.3:80": 47 / 93.8, "127.0.55.4:80": 30 / 93.8}},
		{Locality{"region": "r9"},
			map[string]float64{"127.0.55.1:80": 1.4 / 7.4, "127.0.55.3:80": 4 / 7.4, "127.0.55.4:80": 1 / 7.4, "127.0.55.5:80": 1 / 7.4}},
	}
	for _, c := range cases {
		oracle := distributeEndpointOracle(&spec, c.src, DefaultOverprovisioningFactor, DefaultPanicThreshold)
		if err := sharesClose(oracle, c.want, 1e-9); err != nil {
			t.Fatalf("from %v: oracle %v: %v", c.src, oracle, err)
		}
		// each locality has one healthy endpoint: every policy spreads alike
		for _, policy := range []string{"random", "weighted", "round_robin", "least_request", "consistent_hash"} {
			spec.Policy = policy
			checkEndpointShares(t, &spec, c.src, c.want)
		}
	}
}

// TestDistributeLocalityKeepsKey: with consistent_hash a request key keeps
// its endpoint: the target, the locality and the endpoint are all drawn from
// the key.
func TestDistributeLocalityKeepsKey(t *testing.T) {
	spec := distLocalityCase("127.0.56")
	spec.Policy = "consistent_hash"
	tree := mustBuild(t, &Topology{Services: []ServiceSpec{spec}})
	svc := tree.Services()[0]
	l := svc.Loads(Locality{"region": "r1", "zone": "z1", "subzone": "s1"})
	p := NewPicker(tree, PickerOptions{Seed: 3})
	for i := range 200 {
		key := HashKey(fmt.Sprint("client-", i))
		first, ok := p.PickLoads(svc, &l, key)
		for range 5 {
			if ep, ok2 := p.PickLoads(svc, &l, key); !ok || !ok2 || ep != first {
				t.Fatalf("key %d: picked %d, then %d", i, first, ep)
			}
		}
	}
}

// checkEndpointShares holds loctree's locality level (LocalityShares of
// the one priority, as `tree pick` prints it) and its picks (PickLoads,
// chi-square at z = 4.75) to the shares per endpoint.
func checkEndpointShares(t *testing.T, spec *ServiceSpec, src Locality, want map[string]float64) {
	t.Helper()
	top := &Topology{Services: []ServiceSpec{*spec}}
	tree := mustBuild(t, top)
	svc := tree.Services()[0]
	l := svc.Loads(src)
	if got := localityLevelShares(tree, svc, &l); sharesClose(got, want, 1e-5) != nil {
		t.Fatalf("from %v: locality level %v, Istio+Envoy %v", src, got, want)
	}
	const n = 12000
	picks := pickSpread(t, tree, svc, src, n, 5)
	if chi2, df, stray := spreadChi2(picks, want, n); df > 0 && chi2 > chi2AtZ(df, 4.75) || stray > 0 {
		t.Fatalf("from %v: picks %v, Istio+Envoy %v: chi-square %.1f (df %d), %d picks outside", src, picks, want, chi2, df, stray)
	}
}

// localityLevelShares spreads the one priority's loads over its localities
// by LocalityShares and evenly inside each (random): the share per address.
func localityLevelShares(tree *Tree, svc *Service, l *Loads) map[string]float64 {
	out := map[string]float64{}
	if l.N == 0 {
		return out
	}
	if l.InPanic(0) { // every target's endpoints evenly (hostSourceToUse: AllHosts)
		for i := range l.NTargets {
			for _, sp := range l.TargetSpans(i) {
				spreadEven(out, addrsOf(tree, []Span{sp}), float64(l.Healthy[0]+l.Degraded[0])/100*float64(sp.Len())/float64(l.Counts[0].Total))
			}
		}
		return out
	}
	h, d := float64(l.Healthy[0])/100, float64(l.Degraded[0])/100
	for _, ls := range svc.LocalityShares(l, 0) {
		if ls.Eligible.Len() > 0 {
			spreadEven(out, addrsOf(tree, []Span{ls.Eligible}), h*ls.HealthyShare)
		}
		if ls.Degraded.Len() > 0 {
			spreadEven(out, addrsOf(tree, []Span{ls.Degraded}), d*ls.DegradedShare)
		}
	}
	return out
}

// sharesClose compares two share maps, ignoring zero shares.
func sharesClose(got, want map[string]float64, tol float64) error {
	for k, w := range want {
		if math.Abs(got[k]-w) > tol {
			return fmt.Errorf("%s: %.6f, want %.6f", k, got[k], w)
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok && g > tol {
			return fmt.Errorf("%s: %.6f, want none", k, g)
		}
	}
	return nil
}

// randomDistributeHealth is randomDistributeTopology with prefix patterns
// (several Istio localities per target) and endpoints of every state.
func randomDistributeHealth(rng *rand.Rand) (*Topology, uint32, uint32) {
	top, of, threshold := randomDistributeTopology(rng, rng.IntN(4) == 0)
	spec := &top.Services[0]
	for i := range spec.Endpoints {
		e := &spec.Endpoints[i]
		h := rng.IntN(3) != 0
		e.Healthy, e.Degraded = &h, h && rng.IntN(5) == 0
	}
	return top, of, threshold
}

// TestDistributeLocalitySharesMatchOracle: for random services and sources,
// loctree's locality level (the share of every endpoint through
// LocalityShares) equals the Istio+Envoy oracle's, up to loctree's 2^-20
// fixed point: Istio's rounded locality weights and Envoy's per-locality
// health, not one weight per target.
func TestDistributeLocalitySharesMatchOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(26, 5))
	var multi int
	for it := range 4000 {
		top, of, threshold := randomDistributeHealth(rng)
		spec := &top.Services[0]
		tree, err := Build(top, BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		svc := tree.Services()[0]
		src := randomSource3(rng)
		l := svc.Loads(src)
		want := distributeEndpointOracle(spec, src, of, threshold)
		if err := sharesClose(localityLevelShares(tree, svc, &l), want, 1e-5); err != nil {
			t.Fatalf("case %d, %+v from %v (of %d, panic %d): %v\nall: %v", it, spec.Distribute, src, of, threshold, err, want)
		}
		if len(svc.LocalityShares(&l, 0)) > l.NTargets {
			multi++
		}
	}
	if multi < 1000 {
		t.Fatalf("only %d cases with more localities than targets", multi)
	}
}

// TestDistributeSpreadMatchesOracle: PickLoads itself spreads as the
// oracle says, per endpoint (chi-square at z = 4.75), never outside it.
func TestDistributeSpreadMatchesOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(26, 55))
	for it := range 120 {
		top, of, threshold := randomDistributeHealth(rng)
		spec := &top.Services[0]
		src := randomSource3(rng)
		want := distributeEndpointOracle(spec, src, of, threshold)
		if len(want) == 0 {
			continue
		}
		tree := mustBuild(t, top)
		const n = 6000
		picks := pickSpread(t, tree, tree.Services()[0], src, n, uint64(it))
		if chi2, df, stray := spreadChi2(picks, want, n); df > 0 && chi2 > chi2AtZ(df, 4.75) || stray > 0 {
			t.Fatalf("case %d, %+v from %v (of %d, panic %d): picks %v, oracle %v: chi-square %.1f (df %d), %d outside",
				it, spec.Distribute, src, of, threshold, picks, want, chi2, df, stray)
		}
	}
}

// TestDistributeIstioUint32Arithmetic: applyLocalityWeights multiplies and
// sums in uint32 (float64(originalWeight*weight) / float64(totalWeight)),
// and keeps a locality's weight when the product wraps to 0. With r1/z1
// weighing 2^31 (two endpoints of 2^30) and r1/z2 2^30, a rule r1 70:
// 70·2^31 wraps to 0, so r1/z1 keeps 2^31; 70·2^30 wraps to 2^31, so r1/z2
// gets ceil(2^31 / (3·2^30)) = 1; r2 (weight 1) gets 30. loctree follows the
// oracle, wrap and all.
func TestDistributeIstioUint32Arithmetic(t *testing.T) {
	big, one := uint32(1<<30), uint32(1)
	loc := func(r, z string) Locality { return Locality{"region": r, "zone": z, "subzone": "s"} }
	spec := ServiceSpec{Name: "wrap", Spillover: &SpilloverSpec{},
		Distribute: []DistributeSpec{{From: "r9", To: map[string]uint32{"r1": 70, "r2": 30}}},
		Endpoints: []EndpointSpec{
			{Address: "127.0.57.1:80", Locality: loc("r1", "z1"), Weight: &big},
			{Address: "127.0.57.2:80", Locality: loc("r1", "z1"), Weight: &big},
			{Address: "127.0.57.3:80", Locality: loc("r1", "z2"), Weight: &big},
			{Address: "127.0.57.4:80", Locality: loc("r2", "z1"), Weight: &one},
		}}
	src := Locality{"region": "r9"}
	locs := oracleLocalities(&spec)
	applyLocalityWeightsOracle(locs, spec.Distribute, src)
	if w := []uint32{locs[0].weight, locs[1].weight, locs[2].weight}; w[0] != 1<<31 || w[1] != 1 || w[2] != 30 {
		t.Fatalf("oracle: weights %v, want [2^31 1 30]", w)
	}
	want := distributeEndpointOracle(&spec, src, DefaultOverprovisioningFactor, DefaultPanicThreshold)
	tree := mustBuild(t, &Topology{Services: []ServiceSpec{spec}})
	svc := tree.Services()[0]
	l := svc.Loads(src)
	if err := sharesClose(localityLevelShares(tree, svc, &l), want, 1e-6); err != nil {
		t.Fatalf("locality level: %v (oracle %v)", err, want)
	}
}
