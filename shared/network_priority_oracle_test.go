package shared

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"testing"
)

// Issue 26 items 3 and 4: Istio's priorities where the scopes are a
// failoverPriority list that starts with network (item 3) or puts scopes
// before region under failover rules (item 4). This file is their oracle,
// written from Istio's source and not from loctree's code (istio/istio at
// b6787c126ec0269ef0a24b389264c353c56b6199, istio/istio#60829,
// pilot/pkg/networking/core/loadbalancer/loadbalancer.go):
//
//   - ApplyLocalityLoadBalancer (lines 91-117): with failover enabled (a
//     loctree spillover service), a failoverPriority list is applied by
//     applyFailoverPriorities and then, when failover rules are set too,
//     applyLocalityFailover over the priorities it left; without a
//     failoverPriority list, applyLocalityFailover alone.
//   - applyFailoverPriorityPerLocality (lines 306-365): per endpoint, the
//     first label j whose value differs from the proxy's gives priority
//     len − j; but when the list starts with topology.istio.io/network and
//     the network differs, "ignore network": the match goes on over the
//     labels after it and len is added (lines 312 and 326-336).
//     applyFailoverPriorities (lines 233-283) renumbers the priorities
//     "from 0 (highest) to N (lowest) without skipping".
//   - applyLocalityFailover (lines 181-230): LbPriority (0 region, zone and
//     subzone match; 1 region and zone; 2 region; 3 none), 4 for a region
//     other than the failover rule's to when the rule's from is the proxy's
//     region; then "priorityInt := int(Priority*5) + priority" over the
//     failoverPriority's priority, and the renumbering again.
//
// loctree's mapping (docs/ISTIO.md): a spillover service whose scopes are
// not the default [region, zone, subzone] is failoverPriority = its scopes
// ("network" for topology.istio.io/network); failover rules are Istio's.

// istioLbPriority transcribes util.LbPriority (pilot/pkg/networking/util/
// util.go at b6787c126ec0): 0 when region, zone and subzone match, 1 when
// region and zone do, 2 when region does, else 3.
func istioLbPriority(proxy, ep Locality) int {
	switch {
	case proxy["region"] != ep["region"]:
		return 3
	case proxy["zone"] != ep["zone"]:
		return 2
	case proxy["subzone"] != ep["subzone"]:
		return 1
	}
	return 0
}

// istioFailoverPriority transcribes applyFailoverPriorityPerLocality's
// per-endpoint priority (before renumbering).
func istioFailoverPriority(labels []string, proxy, ep Locality) int {
	lowest := len(labels)
	includesNetwork := lowest > 0 && labels[0] == "network"
	priority, adjust := 0, 0
	for j, label := range labels {
		name, override, ok := strings.Cut(label, "=")
		valueForProxy := proxy[name]
		if ok {
			valueForProxy = override
		}
		if valueForProxy != ep[name] {
			if j == 0 && includesNetwork {
				adjust = len(labels) // ignore network
				continue
			}
			priority = lowest - j
			break
		}
	}
	return priority + adjust
}

// renumber maps priorities to 0..N-1 in order, without skipping.
func renumber(p []int) []int {
	distinct := slices.Sorted(maps.Keys(func() map[int]bool {
		m := map[int]bool{}
		for _, x := range p {
			m[x] = true
		}
		return m
	}()))
	out := make([]int, len(p))
	for i, x := range p {
		out[i] = sort.SearchInts(distinct, x)
	}
	return out
}

// istioPriorities is each endpoint's Istio priority for a spillover service
// and a source (ApplyLocalityLoadBalancer's failover branch).
func istioPriorities(spec *ServiceSpec, src Locality) []int {
	scopes := spec.Scopes
	if len(scopes) == 0 {
		scopes = DefaultScopes()
	}
	fp := !slices.Equal(scopes, DefaultScopes())
	out := make([]int, len(spec.Endpoints))
	if fp {
		for i, e := range spec.Endpoints {
			out[i] = istioFailoverPriority(scopes, src, e.Locality)
		}
		out = renumber(out)
		if len(spec.Failover) == 0 {
			return out
		}
	}
	for i, e := range spec.Endpoints {
		out[i] = out[i]*5 + istioLocalityFailover(spec.Failover, src, e.Locality)
	}
	return renumber(out)
}

// istioLocalityFailover is applyLocalityFailover's priority of one
// endpoint: LbPriority, and 4 for a region other than the first matching
// rule's to.
func istioLocalityFailover(rules []FailoverSpec, proxy, ep Locality) int {
	priority := istioLbPriority(proxy, ep)
	if priority == 3 {
		for _, f := range rules {
			if f.From == proxy["region"] {
				if ep["region"] != f.To {
					priority = 4
				}
				break
			}
		}
	}
	return priority
}

// networkPriorityOracle groups the endpoints by Istio's priorities and
// applies Envoy's loads (priority_oracle_test.go's envoyLoads).
func networkPriorityOracle(spec *ServiceSpec, src Locality, of, threshold uint32) []oraclePriority {
	prio := istioPriorities(spec, src)
	n := 0
	for _, p := range prio {
		n = max(n, p+1)
	}
	out := make([]oraclePriority, n)
	sets := make([]envoyHostSet, n)
	for i, e := range spec.Endpoints {
		p := &out[prio[i]]
		ap := netip.MustParseAddrPort(e.Address)
		addr := netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String()
		p.all = append(p.all, addr)
		switch endpointState(spec, &spec.Endpoints[i]) {
		case 0:
			p.healthy = append(p.healthy, addr)
		case 1:
			p.degraded = append(p.degraded, addr)
		}
	}
	for i := range out {
		p := &out[i]
		p.nHealthy, p.nDegr, p.nTotal = len(p.healthy), len(p.degraded), len(p.all)
		for _, s := range [][]string{p.healthy, p.degraded, p.all} {
			slices.Sort(s)
		}
		sets[i] = envoyHostSet{hosts: p.nTotal, healthy: p.nHealthy, degraded: p.nDegr}
	}
	if n == 0 {
		return nil
	}
	h, d, panic := envoyLoads(sets, of, threshold)
	for i := range out {
		out[i].healthyLoad, out[i].degrLoad, out[i].panic = h[i], d[i], panic[i]
	}
	return out
}

// comparePriorities holds shared's loads to the oracle's priorities: the
// same endpoints in each (by set), loads and panic flags.
func comparePriorities(tree *Tree, l *Loads, want []oraclePriority) error {
	if l.N != len(want) {
		return fmt.Errorf("%d priorities, Istio %d", l.N, len(want))
	}
	for p, w := range want {
		if uint32(l.Healthy[p]) != w.healthyLoad || uint32(l.Degraded[p]) != w.degrLoad || l.InPanic(p) != w.panic {
			return fmt.Errorf("priority %d: load %d/%d panic %v, oracle %d/%d panic %v", p, l.Healthy[p], l.Degraded[p], l.InPanic(p), w.healthyLoad, w.degrLoad, w.panic)
		}
		sp := l.Spans(p)
		if got := addrsOf(tree, append(append(sp[0][:], sp[1][:]...), sp[2][:]...)); !slices.Equal(got, orEmpty(w.all)) {
			return fmt.Errorf("priority %d: %v, Istio %v", p, got, w.all)
		}
	}
	return nil
}

// istioVectorEndpoints are the endpoints of Istio's
// buildWrappedLocalityLbEndpointsForFailoverPriorityWithFailover
// (loadbalancer_test.go at b6787c126ec0, lines 1975-2100): address,
// network, cluster and locality.
var istioVectorEndpoints = []struct{ addr, network, cluster, region, zone, subzone string }{
	{"1.1.1.1", "n1", "c1", "region1", "zone1", "subzone1"},
	{"2.2.2.2", "n2", "c2", "region1", "zone2", "subzone2"},
	{"3.3.3.3", "n1", "c3", "region2", "zone2", "subzone2"},
	{"4.4.4.4", "n2", "c4", "region3", "zone3", "subzone3"},
	{"5.5.5.5", "n2", "c2", "region2", "zone2", "subzone2"},
	{"6.6.6.6", "n1", "c6", "region3", "zone3", "subzone3"},
}

// istioVector is one of Istio's expectations over those endpoints: loctree
// scopes, failover rules, the proxy, and each address's priority.
type istioVector struct {
	name     string
	scopes   []string
	failover []FailoverSpec
	src      Locality
	want     map[string]int
}

// istioNetworkVectors are loadbalancer_test.go's (at b6787c126ec0):
//
//   - "FailoverPriority including locality" (item 3; lines 868-1017):
//     failoverPriority [topology.istio.io/network, region, zone], a proxy
//     on n1 in region2/zone2 (the test sets each endpoint's region and zone
//     labels from its locality): "n1 r2 z2" 0, "n1 r1 z1" and "n1 r3 z3"
//     1, "n2 r2 z2" 2, "n2 r1 z2" and "n2 r3 z3" 3.
//   - "FailoverPriority with Failover" / "match all labels" (item 4; lines
//     1024-1150): failoverPriority [network, cluster], failover region1 →
//     region2, a proxy n2/c2 in region1/zone1/subzone1: 2.2.2.2 0, 5.5.5.5
//     1, 4.4.4.4 2, 1.1.1.1 3, 3.3.3.3 4, 6.6.6.6 5. In loctree's scopes
//     the failoverPriority is [network, cluster] followed by the locality
//     scopes that the failover rules rank by.
var istioNetworkVectors = []istioVector{
	{"FailoverPriority including locality", []string{"network", "region", "zone"}, nil,
		Locality{"network": "n1", "region": "region2", "zone": "zone2"},
		map[string]int{"3.3.3.3": 0, "1.1.1.1": 1, "6.6.6.6": 1, "5.5.5.5": 2, "2.2.2.2": 3, "4.4.4.4": 3}},
	{"FailoverPriority with Failover", []string{"network", "cluster", "region", "zone", "subzone"},
		[]FailoverSpec{{From: "region1", To: "region2"}},
		Locality{"network": "n2", "cluster": "c2", "region": "region1", "zone": "zone1", "subzone": "subzone1"},
		map[string]int{"2.2.2.2": 0, "5.5.5.5": 1, "4.4.4.4": 2, "1.1.1.1": 3, "3.3.3.3": 4, "6.6.6.6": 5}},
}

func (v *istioVector) spec() *ServiceSpec {
	spec := &ServiceSpec{Name: "fp", Scopes: v.scopes, Spillover: &SpilloverSpec{}, Failover: v.failover}
	for i, e := range istioVectorEndpoints {
		loc := Locality{"network": e.network, "cluster": e.cluster, "region": e.region, "zone": e.zone, "subzone": e.subzone}
		for k := range loc {
			if !slices.Contains(v.scopes, k) {
				delete(loc, k)
			}
		}
		spec.Endpoints = append(spec.Endpoints, EndpointSpec{Address: fmt.Sprintf("127.0.3.%d:80", i+1), Locality: loc})
	}
	return spec
}

// TestIstioNetworkVectorsOracle: the oracle reproduces Istio's own
// expectations.
func TestIstioNetworkVectorsOracle(t *testing.T) {
	for _, v := range istioNetworkVectors {
		spec := v.spec()
		got := istioPriorities(spec, v.src)
		for i, e := range istioVectorEndpoints {
			if got[i] != v.want[e.addr] {
				t.Fatalf("%s: %s priority %d, Istio's test %d (all %v)", v.name, e.addr, got[i], v.want[e.addr], got)
			}
		}
	}
}

// refusedBeforeRegion says whether Build refuses a spec for more scopes
// before region under failover rules than its groups of copies hold
// (groups.go: 3 classes, 2 under the network rule): Istio's priorities
// split every rank of those scopes again by region, zone and subzone
// (rank × 5 + LbPriority); the oracle above still computes them.
func refusedBeforeRegion(spec *ServiceSpec) bool {
	at := slices.Index(spec.Scopes, "region")
	return len(spec.Failover) > 0 && at > MaxScopesBeforeRegion(spec.Scopes[0] == "network")
}

// buildOrRefused builds spec, or checks that Build refuses it as
// refusedBeforeRegion says; nil then.
func buildOrRefused(t *testing.T, spec *ServiceSpec) *Tree {
	t.Helper()
	tree, err := Build(&Topology{Services: []ServiceSpec{*spec}}, BuildOptions{})
	switch {
	case refusedBeforeRegion(spec) && (!errors.Is(err, ErrInvalidTopology) || !strings.Contains(err.Error(), "before region")):
		t.Fatalf("scopes %v with failover: %v, want refused", spec.Scopes, err)
	case refusedBeforeRegion(spec):
		return nil
	case err != nil:
		t.Fatal(err)
	}
	return tree
}

// TestIstioNetworkVectorsShared holds shared's priorities to Istio's
// vectors: "FailoverPriority including locality" (item 3) as Istio ranks
// it; "FailoverPriority with Failover" has cluster before region and is
// refused. On 2066581 (before the network rule for spillover): 3
// priorities, Istio 4.
func TestIstioNetworkVectorsShared(t *testing.T) {
	compared := 0
	for _, v := range istioNetworkVectors {
		spec := v.spec()
		tree := buildOrRefused(t, spec)
		if tree == nil {
			continue
		}
		l := tree.Services()[0].Loads(v.src)
		if err := comparePriorities(tree, &l, networkPriorityOracle(spec, v.src, DefaultOverprovisioningFactor, DefaultPanicThreshold)); err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		compared++
	}
	if compared == 0 {
		t.Fatal("no vector compared")
	}
}

// TestNetworkPrioritiesMatchIstio: random spillover services whose scopes
// start with network (with and without failover rules, then region, zone,
// subzone) and random sources: shared's priorities, loads and endpoint
// sets are Istio's and Envoy's.
func TestNetworkPrioritiesMatchIstio(t *testing.T) {
	rng := rand.New(rand.NewPCG(26, 34))
	forms := [][]string{{"network", "region", "zone"}, {"network", "region", "zone", "subzone"}, {"network", "cluster", "region", "zone", "subzone"},
		{"cluster", "region", "zone", "subzone"}, {"cluster", "region", "zone"}, {"cluster", "zone", "subzone"},
		{"network", "cluster", "region", "zone", "subzone", "node"}, {"cluster", "network", "region", "zone", "subzone"},
		{"cluster", "env", "team", "region", "zone", "subzone"}, {"network", "cluster", "env", "region", "zone"}}
	for it := range 3000 {
		scopes := forms[rng.IntN(len(forms))]
		of := []uint32{140, 100, 200}[rng.IntN(3)]
		threshold := []uint32{0, 50, 30}[rng.IntN(3)]
		spec := ServiceSpec{Name: "fp", Scopes: scopes, Spillover: &SpilloverSpec{OverprovisioningFactor: &of, PanicThreshold: &threshold}}
		if slices.Contains(scopes, "region") && slices.Contains(scopes, "subzone") && rng.IntN(2) == 0 {
			spec.Failover = []FailoverSpec{{From: "region-1", To: "region-2"}}
		}
		for i := range 2 + rng.IntN(20) {
			loc := Locality{}
			for _, sc := range scopes {
				loc[sc] = fmt.Sprintf("%s-%d", sc, 1+rng.IntN(2))
			}
			h := rng.IntN(4) != 0
			spec.Endpoints = append(spec.Endpoints, EndpointSpec{Address: fmt.Sprintf("127.0.34.%d:80", i+1), Locality: loc, Healthy: &h})
		}
		src := Locality{}
		for _, sc := range scopes {
			src[sc] = fmt.Sprintf("%s-%d", sc, 1+rng.IntN(3))
		}
		tree := buildOrRefused(t, &spec)
		if tree == nil {
			continue
		}
		l := tree.Services()[0].Loads(src)
		if err := comparePriorities(tree, &l, networkPriorityOracle(&spec, src, of, threshold)); err != nil {
			t.Fatalf("case %d, scopes %v, failover %v, from %v: %v", it, scopes, spec.Failover, src, err)
		}
	}
}

// TestNetworkSpreadMatchesEnvoy: random spillover services with network
// first (with and without failover rules, degraded and unhealthy
// endpoints, weights): PickLoads spreads as Envoy does over Istio's
// priorities, a locality of an other-network priority being one
// region/zone/subzone across those networks, as istiod groups endpoints by
// locality alone (locality_oracle_test.go's envoyLocalities).
func TestNetworkSpreadMatchesEnvoy(t *testing.T) {
	rng := rand.New(rand.NewPCG(26, 35))
	forms := [][]string{{"network", "region", "zone"}, {"network", "region", "zone", "subzone"}, {"network", "region", "zone", "subzone", "node"},
		{"network", "zone"}, {"network", "cluster", "node"},
		{"cluster", "region", "zone", "subzone"}, {"cluster", "region", "zone"}, {"cluster", "zone"}, {"cluster", "region", "zone", "subzone", "node"},
		{"network", "cluster", "region", "zone", "subzone"}, {"cluster", "network", "region", "zone"}, {"cluster", "env", "team", "region", "zone"},
		{"network", "cluster", "zone", "subzone"}}
	for it := range 240 {
		scopes := forms[rng.IntN(len(forms))]
		of := []uint32{140, 100, 200}[rng.IntN(3)]
		threshold := []uint32{0, 50, 30}[rng.IntN(3)]
		spec := ServiceSpec{Name: "fp", Scopes: scopes, Spillover: &SpilloverSpec{OverprovisioningFactor: &of, PanicThreshold: &threshold}}
		if slices.Contains(scopes, "region") && rng.IntN(2) == 0 {
			spec.Failover = []FailoverSpec{{From: "region-1", To: "region-2"}}
		}
		for i := range 3 + rng.IntN(20) {
			loc := Locality{}
			for _, sc := range scopes {
				loc[sc] = fmt.Sprintf("%s-%d", sc, 1+rng.IntN(2))
			}
			h, w := rng.IntN(3) != 0, uint32(1+rng.IntN(3))
			spec.Endpoints = append(spec.Endpoints, EndpointSpec{Address: fmt.Sprintf("127.0.35.%d:80", i+1),
				Locality: loc, Weight: &w, Healthy: &h, Degraded: h && rng.IntN(5) == 0})
		}
		src := Locality{}
		for _, sc := range scopes {
			src[sc] = fmt.Sprintf("%s-%d", sc, 1+rng.IntN(3))
		}
		tree := mustBuild(t, &Topology{Services: []ServiceSpec{spec}})
		const n = 6000
		want := spreadOverPriorities(&spec, networkPriorityOracle(&spec, src, of, threshold), of)
		if noShare(want) { // no host: the chosen priority's set is empty (panic off)
			l := tree.Services()[0].Loads(src)
			if ep, ok := NewPicker(tree, PickerOptions{Seed: 7}).PickLoads(tree.Services()[0], &l, 0); ok {
				t.Fatalf("case %d: picked %d, Envoy has no host", it, ep)
			}
			continue
		}
		got := pickSpread(t, tree, tree.Services()[0], src, n, 7)
		chi2, df, stray := spreadChi2(got, want, n)
		if df > 0 && chi2 > chi2AtZ(df, 4.75) || stray > 0 {
			t.Fatalf("case %d, scopes %v, failover %v, from %v: picks %v, Envoy's shares %v: chi-square %.1f (df %d), %d picks outside", it, scopes, spec.Failover, src, got, want, chi2, df, stray)
		}
	}
}

// issue26NetworkTopology is a spillover service with network first and a
// failover rule r1 → r2 (issue 26 items 3 and 4), for a source on n1 in
// r1/z1/s1. Worked by hand from Istio's priorities (applyFailoverPriorities
// at b6787c12 over applyLocalityFailover) and Envoy's loads and locality
// weights (factor 140, panic 50):
//
//   - P0 n1 r1/z1/s1: .1 unhealthy (health 0); P1 n1, a region other than
//     r2: .2 unhealthy (0);
//   - P2 other networks, r1/z1/s1: .3 healthy, .4 and .8 unhealthy: health
//     140·1/3 = 46;
//   - P3 other networks, r1 but another zone: .5 (n2) healthy and .6 (n3)
//     unhealthy in r1/z2/s1, .7 (n2) healthy in r1/z3/s1: health 93.
//
// The healthy availabilities reach 100 at P3: loads 46 and 54, no panic.
// P3's localities are r1/z2/s1 across n2 and n3 (weight 2, effective
// 2·min(1, 1.4·1/2) = 1.4) and r1/z3/s1 (1): .5 gets 54·1.4/2.4 = 31.5 %,
// .7 22.5 %, .3 46 %. Ranking network like any other scope (before
// b6787c12) put .3-.8 in one last priority; weighing n2/r1/z2/s1 and
// n3/r1/z2/s1 apart gives .5 and .7 27 % each.
func issue26NetworkTopology() *Topology {
	f := false
	ep := func(i int, network, zone string, healthy bool) EndpointSpec {
		e := EndpointSpec{Address: fmt.Sprintf("127.0.36.%d:80", i), Locality: Locality{"network": network, "region": "r1", "zone": zone, "subzone": "s1"}}
		if !healthy {
			e.Healthy = &f
		}
		return e
	}
	eps := []EndpointSpec{ep(1, "n1", "z1", false), ep(2, "n1", "z1", false), ep(3, "n2", "z1", true), ep(4, "n2", "z1", false),
		ep(5, "n2", "z2", true), ep(6, "n3", "z2", false), ep(7, "n2", "z3", true), ep(8, "n3", "z1", false)}
	eps[1].Locality["region"] = "r3"
	return &Topology{Services: []ServiceSpec{{Name: "net", Scopes: []string{"network", "region", "zone", "subzone"},
		Spillover: &SpilloverSpec{}, Failover: []FailoverSpec{{From: "r1", To: "r2"}}, Endpoints: eps}}}
}

// TestNetworkPrioritiesIssueExample: the oracle gives the shares worked by
// hand, and PickLoads spreads by them.
func TestNetworkPrioritiesIssueExample(t *testing.T) {
	top := issue26NetworkTopology()
	spec := &top.Services[0]
	src := Locality{"network": "n1", "region": "r1", "zone": "z1", "subzone": "s1"}
	want := spreadOverPriorities(spec, networkPriorityOracle(spec, src, 140, 50), 140)
	for addr, share := range map[string]float64{"127.0.36.3:80": 0.46, "127.0.36.5:80": 0.54 * 1.4 / 2.4, "127.0.36.7:80": 0.54 / 2.4} {
		if math.Abs(want[addr]-share) > 1e-9 {
			t.Fatalf("oracle: %v, want %s %.4f", want, addr, share)
		}
	}
	tree := mustBuild(t, top)
	const n = 12000
	got := pickSpread(t, tree, tree.Services()[0], src, n, 7)
	if chi2, df, stray := spreadChi2(got, want, n); chi2 > chi2AtZ(df, 4.75) || stray > 0 {
		t.Fatalf("picks %v, shares %v: chi-square %.1f (df %d), %d outside", got, want, chi2, df, stray)
	}
}

// noShare says whether no endpoint has a share of the traffic.
func noShare(shares map[string]float64) bool {
	for _, v := range shares {
		if v > 0 {
			return false
		}
	}
	return true
}

// TestOtherClustersRankedByLocalityOnly: with failover rules and a scope
// after subzone, Istio ranks the other clusters' endpoints by
// failoverPriority rank × 5 + LbPriority, and LbPriority (util.LbPriority)
// looks at region, zone and subzone only: two endpoints of other clusters
// in the source's subzone are one priority whatever their node, while the
// source's own cluster ranks by node too (its failoverPriority rank). The
// oracle says so (one priority of .1 and .2); ranking the copies by every
// scope after cluster, as the network rule ranks the other networks, put
// .1 (the source's node) before .2.
func TestOtherClustersRankedByLocalityOnly(t *testing.T) {
	src := Locality{"cluster": "c3", "region": "r2", "zone": "z2", "subzone": "s2", "node": "n2"}
	spec := ServiceSpec{Name: "clu", Scopes: []string{"cluster", "region", "zone", "subzone", "node"}, Spillover: &SpilloverSpec{},
		Failover: []FailoverSpec{{From: "r2", To: "r1"}}}
	for i, e := range []Locality{
		{"cluster": "c2", "region": "r2", "zone": "z2", "subzone": "s2", "node": "n2"},
		{"cluster": "c1", "region": "r2", "zone": "z2", "subzone": "s2", "node": "n1"},
		{"cluster": "c3", "region": "r2", "zone": "z2", "subzone": "s2", "node": "n1"},
		{"cluster": "c3", "region": "r2", "zone": "z2", "subzone": "s2", "node": "n3"},
	} {
		spec.Endpoints = append(spec.Endpoints, EndpointSpec{Address: fmt.Sprintf("127.0.38.%d:80", i+1), Locality: e})
	}
	want := networkPriorityOracle(&spec, src, DefaultOverprovisioningFactor, DefaultPanicThreshold)
	if len(want) != 2 || len(want[1].all) != 2 {
		t.Fatalf("oracle: %+v, want the source's cluster's two nodes, then the other clusters' subzone as one priority", want)
	}
	tree := mustBuild(t, &Topology{Services: []ServiceSpec{spec}})
	l := tree.Services()[0].Loads(src)
	if err := comparePriorities(tree, &l, want); err != nil {
		t.Fatal(err)
	}
}
