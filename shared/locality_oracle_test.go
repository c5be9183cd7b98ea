package shared

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
)

// This file is the oracle of the locality-weighted choice inside a
// priority, written from its sources and not from loctree's code:
//
//   - Istio (istio/istio at 86c9f01fd735fb01d8192f5bcaf0d424afb7f14c),
//     pilot/pkg/networking/core/loadbalancer/loadbalancer.go
//     LocalityLBSettings.ApplyToCluster (lines 124-149): the cluster gets
//     LocalityWeightedLbConfig when "enableFailover && (failover != nil ||
//     failoverPriority != nil)", or with distribute (or the
//     ENABLE_LOCALITY_WEIGHTED_LB_CONFIG flag, default false:
//     pilot/pkg/features/experimental.go:199); enableFailover is outlier
//     detection, which loctree's spillover stands for (docs/ISTIO.md). A
//     loctree service whose scopes are not the default [region, zone,
//     subzone] is an Istio failoverPriority (docs/ISTIO.md's table).
//     pilot/pkg/xds/endpoints/endpoint_builder.go generate (lines 524-566):
//     endpoints are grouped by their locality label (region/zone/subzone)
//     and a locality's LoadBalancingWeight is the sum of its endpoints'
//     weights (addUint32: saturated at 2^32-1); applyFailoverPriorityPerLocality
//     (loadbalancer.go lines 605-663) splits a locality by priority and
//     "reset weight" to the sum of each part's endpoints.
//   - Envoy: load_balancer_impl.cc ZoneAwareLoadBalancerBase::hostSourceToUse
//     (envoyproxy/envoy 00cf9a056f3e, source/extensions/load_balancing_policies/
//     common/load_balancer_impl.cc): a priority in panic uses AllHosts; else,
//     with locality_weighted_balancing_, chooseHealthyLocality (or
//     chooseDegradedLocality) and that locality's healthy (degraded) hosts;
//     with no locality (no scheduler) the priority's healthy (degraded)
//     hosts. source/common/upstream/locality_wrr.cc (e8e02bb2f613):
//     rebuildLocalityScheduler (no scheduler when the priority has no
//     eligible host or every effective weight is 0) and
//     effectiveLocalityWeight: weight · min(1, factor/100 · eligible/hosts).
//     The scheduler is an EDF over the effective weights: in the long run,
//     locality shares proportional to them.
//
// The oracle gives every endpoint its share of the source's traffic when
// the policy spreads evenly inside the locality (random).

// istioLocalityWeighted transcribes ApplyToCluster's condition.
func istioLocalityWeighted(spec *ServiceSpec) bool {
	failoverPriority := len(spec.Scopes) > 0 && !slices.Equal(spec.Scopes, DefaultScopes()) && !slices.Equal(spec.Scopes, []string{NoLocalityScope})
	enableFailover := spec.Spillover != nil
	return (enableFailover && (len(spec.Failover) > 0 || failoverPriority)) || len(spec.Distribute) > 0
}

// envoyLocality is one locality of one priority as Envoy holds it.
type envoyLocality struct {
	weight                   uint32 // Istio's LoadBalancingWeight
	healthy, degraded, hosts []string
}

// envoyEffectiveLocalityWeight transcribes effectiveLocalityWeight (no
// excluded hosts).
func envoyEffectiveLocalityWeight(l *envoyLocality, eligible int, of uint32) float64 {
	hostCount := len(l.hosts)
	if hostCount == 0 {
		return 0
	}
	ratio := 1.0 * float64(eligible) / float64(hostCount)
	return float64(l.weight) * math.Min(1.0, float64(of)/100.0*ratio)
}

// localitySpreadOracle is the share (0..1) of the source's traffic each
// endpoint address gets.
func localitySpreadOracle(spec *ServiceSpec, src Locality, of, threshold uint32) map[string]float64 {
	return spreadOverPriorities(spec, priorityOracle(spec, src, of, threshold), of)
}

// spreadOverPriorities is localitySpreadOracle over given priorities.
func spreadOverPriorities(spec *ServiceSpec, prios []oraclePriority, of uint32) map[string]float64 {
	byAddr := map[string]*EndpointSpec{}
	for i := range spec.Endpoints {
		ap := netip.MustParseAddrPort(spec.Endpoints[i].Address)
		byAddr[netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String()] = &spec.Endpoints[i]
	}
	out := map[string]float64{}
	if len(prios) == 0 {
		return out
	}
	hl, dl := make([]uint32, len(prios)), make([]uint32, len(prios))
	for i, p := range prios {
		hl[i], dl[i] = p.healthyLoad, p.degrLoad
	}
	if slices.Max(hl) == 0 && slices.Max(dl) == 0 {
		hl[0] = 100 // choosePriority's "unexpected load error": P0 healthy
	}
	weighted := istioLocalityWeighted(spec)
	for i, p := range prios {
		if p.panic {
			spreadEven(out, p.all, float64(hl[i]+dl[i])/100)
			continue
		}
		for _, avail := range []struct {
			load     uint32
			eligible []string
			pick     func(*envoyLocality) []string
		}{
			{hl[i], p.healthy, func(l *envoyLocality) []string { return l.healthy }},
			{dl[i], p.degraded, func(l *envoyLocality) []string { return l.degraded }},
		} {
			load := float64(avail.load) / 100
			if load == 0 {
				continue
			}
			locs := envoyLocalities(p, byAddr)
			var sum float64
			eff := make([]float64, len(locs))
			for k, l := range locs {
				eff[k] = envoyEffectiveLocalityWeight(l, len(avail.pick(l)), of)
				sum += eff[k]
			}
			if !weighted || sum == 0 || len(avail.eligible) == 0 {
				spreadEven(out, avail.eligible, load)
				continue
			}
			for k, l := range locs {
				spreadEven(out, avail.pick(l), load*eff[k]/sum)
			}
		}
	}
	return out
}

// envoyLocalities groups a priority's hosts by Istio's locality label and
// weighs each as endpoint_builder.go and applyFailoverPriorityPerLocality do.
func envoyLocalities(p oraclePriority, byAddr map[string]*EndpointSpec) []*envoyLocality {
	m := map[string]*envoyLocality{}
	var keys []string
	for _, a := range p.all {
		e := byAddr[a]
		k := e.Locality["region"] + "/" + e.Locality["zone"] + "/" + e.Locality["subzone"]
		l, ok := m[k]
		if !ok {
			l = &envoyLocality{}
			m[k] = l
			keys = append(keys, k)
		}
		w := uint32(1)
		if e.Weight != nil {
			w = *e.Weight
		}
		l.weight = uint32(min(uint64(l.weight)+uint64(w), math.MaxUint32))
		l.hosts = append(l.hosts, a)
		if slices.Contains(p.healthy, a) {
			l.healthy = append(l.healthy, a)
		}
		if slices.Contains(p.degraded, a) {
			l.degraded = append(l.degraded, a)
		}
	}
	out := make([]*envoyLocality, len(keys))
	for i, k := range keys {
		out[i] = m[k]
	}
	return out
}

func spreadEven(out map[string]float64, addrs []string, share float64) {
	for _, a := range addrs {
		out[a] += share / float64(len(addrs))
	}
}

// pickSpread counts n PickLoads picks of svc from src by address.
func pickSpread(t *testing.T, tree *Tree, svc *Service, src Locality, n int, seed uint64) map[string]int {
	t.Helper()
	l := svc.Loads(src)
	p := NewPicker(tree, PickerOptions{Seed: seed})
	got := map[string]int{}
	for i := range n {
		ep, ok := p.PickLoads(svc, &l, HashKey(fmt.Sprint(i)))
		if !ok {
			t.Fatalf("pick %d from %v: none", i, src)
		}
		got[addrsOf(tree, []Span{{ep, ep + 1}})[0]]++
	}
	return got
}

// spreadChi2 is the chi-square of picks against shares, its degrees of
// freedom, and the picks of addresses with no share.
func spreadChi2(picks map[string]int, shares map[string]float64, n int) (chi2 float64, df int, stray int) {
	for a, s := range shares {
		if s == 0 {
			continue
		}
		exp := s * float64(n)
		d := float64(picks[a]) - exp
		chi2 += d * d / exp
		df++
	}
	for a, c := range picks {
		if shares[a] == 0 {
			stray += c
		}
	}
	return chi2, df - 1, stray
}

func checkSpreadOracle(t *testing.T, top *Topology, src Locality, n int) {
	t.Helper()
	spec := &top.Services[0]
	of, threshold := uint32(DefaultOverprovisioningFactor), uint32(DefaultPanicThreshold)
	if spec.Spillover.OverprovisioningFactor != nil {
		of = *spec.Spillover.OverprovisioningFactor
	}
	if spec.Spillover.PanicThreshold != nil {
		threshold = *spec.Spillover.PanicThreshold
	}
	tree := mustBuild(t, top)
	want := localitySpreadOracle(spec, src, of, threshold)
	got := pickSpread(t, tree, tree.Services()[0], src, n, 7)
	chi2, df, stray := spreadChi2(got, want, n)
	if df > 0 && chi2 > chi2AtZ(df, 4.75) || stray > 0 {
		t.Fatalf("from %v: picks %v, Envoy's shares %v: chi-square %.1f (df %d), %d picks outside", src, got, want, chi2, df, stray)
	}
}

// issue26LocalityTopology is issue 26 item 2's example: scopes [region,
// zone, subzone], spillover {}, failover r1→r2; s1 has one unhealthy
// endpoint, s2 one healthy (.2), s3 three healthy and one unhealthy
// (.3–.5, .6).
func issue26LocalityTopology() *Topology {
	f := false
	loc := func(s string) Locality { return Locality{"region": "r1", "zone": "z1", "subzone": s} }
	eps := []EndpointSpec{
		{Address: "127.0.26.1:80", Locality: loc("s1"), Healthy: &f},
		{Address: "127.0.26.2:80", Locality: loc("s2")},
		{Address: "127.0.26.3:80", Locality: loc("s3")},
		{Address: "127.0.26.4:80", Locality: loc("s3")},
		{Address: "127.0.26.5:80", Locality: loc("s3")},
		{Address: "127.0.26.6:80", Locality: loc("s3"), Healthy: &f},
		{Address: "127.0.26.7:80", Locality: Locality{"region": "r2", "zone": "z1", "subzone": "s1"}},
	}
	return &Topology{Services: []ServiceSpec{{
		Name: "loc", Spillover: &SpilloverSpec{}, Failover: []FailoverSpec{{From: "r1", To: "r2"}}, Endpoints: eps,
	}}}
}

// TestLocalityWeightedIssueExample: Envoy gives .2 20 % and .3–.5 26.7 %
// each (s2's effective weight 1, s3's 4·min(1, 1.4·3/4) = 4).
func TestLocalityWeightedIssueExample(t *testing.T) {
	top := issue26LocalityTopology()
	src := Locality{"region": "r1", "zone": "z1", "subzone": "s1"}
	want := localitySpreadOracle(&top.Services[0], src, 140, 50)
	if math.Abs(want["127.0.26.2:80"]-0.2) > 1e-9 || math.Abs(want["127.0.26.3:80"]-0.8/3) > 1e-9 {
		t.Fatalf("oracle: %v", want)
	}
	checkSpreadOracle(t, top, src, 12000)
}

// twoLocalities is Envoy's locality_wrr_test.cc two-locality setting (at
// e8e02bb2): localities A and B of one priority (zones of region r0, a
// source in another zone of it), A with hostsA endpoints of weight wA of
// which healthyA are healthy, B one healthy endpoint of weight wB. A
// failover rule turns locality weighting on (Istio's ApplyToCluster);
// panic is off, so the one priority takes all the load however unhealthy.
func twoLocalities(of uint32, hostsA, healthyA int, wA, wB uint32) *Topology {
	zero := uint32(0)
	var eps []EndpointSpec
	for i := range hostsA {
		h := i < healthyA
		eps = append(eps, EndpointSpec{Address: fmt.Sprintf("127.0.27.%d:80", i+1), Weight: &wA, Healthy: &h,
			Locality: Locality{"region": "r0", "zone": "A", "subzone": "s"}})
	}
	eps = append(eps, EndpointSpec{Address: "127.0.27.100:80", Weight: &wB, Locality: Locality{"region": "r0", "zone": "B", "subzone": "s"}})
	return &Topology{Services: []ServiceSpec{{
		Name: "wrr", Spillover: &SpilloverSpec{OverprovisioningFactor: &of, PanicThreshold: &zero},
		Failover: []FailoverSpec{{From: "r0", To: "r9"}}, Endpoints: eps,
	}}}
}

// TestLocalityWeightedEnvoyVectors takes locality_wrr_test.cc's vectors (at
// e8e02bb2): UnhealthyFailover (A five hosts, weight 1; B one host, weight
// 2; factor 140: with 5, 4, 3, 2, 1, 0 healthy hosts in A, A gets 33, 33,
// 29, 22, 12, 0 of 100 picks) and OverProvisioningFactorTest
// LocalityPickChanges (A two hosts, one healthy; B one; weights 1 and 1:
// factor 100 gives 33/67, 200 gives 50/50). Istio's locality weight is the
// sum of its endpoints' weights, so A's five endpoints weigh 1 each and B's
// one 10 (1:2), and LocalityPickChanges' B weighs 2 (A's two weigh 1 each).
func TestLocalityWeightedEnvoyVectors(t *testing.T) {
	src := Locality{"region": "r0", "zone": "C", "subzone": "s"}
	cases := []struct {
		top   *Topology
		wantA float64 // A's share, from Envoy's 100 deterministic picks
	}{
		{twoLocalities(140, 5, 5, 1, 10), 0.33},
		{twoLocalities(140, 5, 4, 1, 10), 0.33},
		{twoLocalities(140, 5, 3, 1, 10), 0.29},
		{twoLocalities(140, 5, 2, 1, 10), 0.22},
		{twoLocalities(140, 5, 1, 1, 10), 0.12},
		{twoLocalities(140, 5, 0, 1, 10), 0},
		{twoLocalities(100, 2, 1, 1, 2), 0.33},
		{twoLocalities(200, 2, 1, 1, 2), 0.50},
	}
	for i, c := range cases {
		spec := &c.top.Services[0]
		want := localitySpreadOracle(spec, src, *spec.Spillover.OverprovisioningFactor, 0)
		if got := want["127.0.27.100:80"]; math.Abs(1-got-c.wantA) > 0.01 {
			t.Fatalf("case %d: oracle gives A %.3f, Envoy's test %.2f", i, 1-got, c.wantA)
		}
		checkSpreadOracle(t, c.top, src, 8000)
	}
}

// TestLocalityWeightedMatchesOracle: random spillover services where Istio
// turns locality weighting on (failover rules, or scopes that are a
// failoverPriority: with node after subzone, or without subzone when no
// endpoint has one) and where it does not, random health and weights:
// PickLoads spreads as the oracle says.
func TestLocalityWeightedMatchesOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(26, 2))
	forms := [][]string{DefaultScopes(), {"region", "zone", "subzone", "node"}, {"region", "zone"}}
	for it := range 150 {
		scopes := forms[rng.IntN(len(forms))]
		of := []uint32{140, 100, 200, 110}[rng.IntN(4)]
		threshold := []uint32{0, 50, 30}[rng.IntN(3)]
		spec := ServiceSpec{Name: "svc", Scopes: scopes, Spillover: &SpilloverSpec{OverprovisioningFactor: &of, PanicThreshold: &threshold}}
		if rng.IntN(2) == 0 {
			spec.Failover = []FailoverSpec{{From: "region-1", To: "region-2"}}
		}
		for i := range 4 + rng.IntN(20) {
			loc := Locality{}
			for _, sc := range scopes {
				loc[sc] = fmt.Sprintf("%s-%d", sc, 1+rng.IntN(2))
			}
			h, w := rng.IntN(3) != 0, uint32(1+rng.IntN(3))
			spec.Endpoints = append(spec.Endpoints, EndpointSpec{Address: fmt.Sprintf("127.0.28.%d:80", i+1),
				Locality: loc, Weight: &w, Healthy: &h, Degraded: h && rng.IntN(5) == 0})
		}
		src := Locality{}
		for _, sc := range scopes {
			src[sc] = fmt.Sprintf("%s-%d", sc, 1+rng.IntN(3))
		}
		t.Run(fmt.Sprint(it), func(t *testing.T) {
			checkSpreadOracle(t, &Topology{Services: []ServiceSpec{spec}}, src, 6000)
		})
	}
}
