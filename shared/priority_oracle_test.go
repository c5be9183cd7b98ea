package shared

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// withOverride sometimes turns one scope other than region into Istio's
// override form "k=v" (v one of the values randomTopology uses, or none).
func withOverride(rng *rand.Rand, spec *ServiceSpec) {
	if rng.IntN(3) != 0 {
		return
	}
	spec.Scopes = slices.Clone(spec.Scopes)
	i := rng.IntN(len(spec.Scopes))
	if spec.Scopes[i] != "region" {
		spec.Scopes[i] = fmt.Sprintf("%s=%s-%d", spec.Scopes[i], spec.Scopes[i], rng.IntN(4))
	}
}

// TestOverrideLookupMatchesIstio: with a "k=v" scope, the plain lookup's
// candidates are the eligible endpoints of best Istio priority.
func TestOverrideLookupMatchesIstio(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for it := range 4000 {
		top := randomTopology(rng)
		spec := &top.Services[0]
		withOverride(rng, spec)
		spec.NetworkRule = NetworkRulePlain // Istio's failoverPriority ranks network like any label
		tree, err := Build(top, BuildOptions{})
		if err != nil {
			t.Fatalf("topology %d: %v", it, err)
		}
		svc := tree.Services()[0]
		for range 4 {
			src := randomSource(rng, spec.Scopes)
			best, want := -1, []string{}
			for _, e := range spec.Endpoints {
				if e.Healthy != nil && !*e.Healthy && spec.Health != "allow_all" {
					continue
				}
				r := istioRank(spec.Scopes, e.Locality, src)
				ap := netip.MustParseAddrPort(e.Address)
				a := netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String()
				switch {
				case r > best:
					best, want = r, []string{a}
				case r == best:
					want = append(want, a)
				}
			}
			if spec.Mode == "strict" && best < len(spec.Scopes) {
				want = []string{}
			}
			slices.Sort(want)
			if got := addrsOf(tree, []Span{{svc.Lookup(src).Lo, svc.Lookup(src).Hi}}); !slices.Equal(got, want) {
				t.Fatalf("topology %d, scopes %v, source %v: %v, Istio %v", it, spec.Scopes, src, got, want)
			}
		}
	}
}

// This file is the oracle of the priority load, written from its sources and
// not from loctree's code:
//
//   - Envoy, source/extensions/load_balancing_policies/common/load_balancer_impl.cc
//     (envoyproxy/envoy at 00cf9a056f3eda1b40f41fc3018a922c143c514b):
//     distributeLoad, LoadBalancerBase::choosePriority,
//     recalculatePerPriorityState, recalculatePerPriorityPanic,
//     recalculateLoadInTotalPanic, isHostSetInPanic, hostSourceToUse.
//   - Istio, pilot/pkg/networking/core/loadbalancer/loadbalancer.go,
//     applyLocalityFailover: an endpoint's priority is how far its locality
//     is from the proxy's (LbPriority: all of region/zone/subzone match → 0,
//     region/zone → 1, region → 2, none → 3), and "Priorities should range
//     from 0 (highest) to N (lowest) without skipping": the distinct
//     priorities are renumbered in order.
//
// It works on endpoint lists, in O(endpoints) per source, with Envoy's
// floating-point panic test.

// envoyHostSet is one priority as Envoy sees it: all its hosts, and how many
// of them are healthy and degraded (no excluded hosts; weighted priority
// health off, Envoy's default).
type envoyHostSet struct{ hosts, healthy, degraded int }

// envoyDistributeLoad transcribes distributeLoad.
func envoyDistributeLoad(load, availability []uint32, totalLoad, nta uint32) (firstAvailable int, remaining uint32) {
	firstAvailable = -1
	for i := range availability {
		if firstAvailable < 0 && availability[i] > 0 {
			firstAvailable = i
		}
		load[i] = min(totalLoad, availability[i]*100/nta)
		totalLoad -= load[i]
	}
	return firstAvailable, totalLoad
}

// envoyIsHostSetInPanic transcribes isHostSetInPanic (in doubles, as Envoy).
func envoyIsHostSetInPanic(hs envoyHostSet, threshold uint32) bool {
	var healthyPercent, degradedPercent float64
	if hs.hosts != 0 {
		healthyPercent = 100.0 * float64(hs.healthy) / float64(hs.hosts)
		degradedPercent = 100.0 * float64(hs.degraded) / float64(hs.hosts)
	}
	return healthyPercent+degradedPercent < float64(min(100, threshold))
}

// envoyLoads transcribes recalculatePerPriorityState (for every priority, from
// fresh vectors), then recalculatePerPriorityPanic and
// recalculateLoadInTotalPanic. of is the overprovisioning factor in percent.
func envoyLoads(sets []envoyHostSet, of, panicThreshold uint32) (healthyLoad, degradedLoad []uint32, panic []bool) {
	n := len(sets)
	healthyLoad, degradedLoad, panic = make([]uint32, n), make([]uint32, n), make([]bool, n)
	health, degraded := make([]uint32, n), make([]uint32, n)
	for i, hs := range sets {
		if hs.hosts > 0 {
			health[i] = uint32(min(100, uint64(of)*uint64(hs.healthy)/uint64(hs.hosts)))
			degraded[i] = uint32(min(100, uint64(of)*uint64(hs.degraded)/uint64(hs.hosts)))
		}
	}
	var sum uint32
	for i := range health {
		sum += health[i] + degraded[i]
	}
	nta := min(sum, 100) // calculateNormalizedTotalAvailability
	if nta != 0 {
		firstHealthy, remaining := envoyDistributeLoad(healthyLoad, health, 100, nta)
		firstDegraded, remaining := envoyDistributeLoad(degradedLoad, degraded, remaining, nta)
		if remaining != 0 {
			if firstHealthy != -1 {
				healthyLoad[firstHealthy] += remaining
			} else {
				degradedLoad[firstDegraded] += remaining
			}
		}
	}
	// recalculatePerPriorityPanic
	threshold := min(100, panicThreshold)
	if threshold == 0 && nta == 0 {
		healthyLoad[0] = 100
		return
	}
	totalPanic := true
	for i := range sets {
		panic[i] = nta != 100 && envoyIsHostSetInPanic(sets[i], threshold)
		totalPanic = totalPanic && panic[i]
	}
	if totalPanic {
		envoyLoadInTotalPanic(sets, healthyLoad, degradedLoad)
	}
	return
}

// envoyLoadInTotalPanic transcribes recalculateLoadInTotalPanic.
func envoyLoadInTotalPanic(sets []envoyHostSet, healthyLoad, degradedLoad []uint32) {
	total := 0
	for _, hs := range sets {
		total += hs.hosts
	}
	if total == 0 {
		healthyLoad[0] = 100
		return
	}
	load, firstNonEmpty := uint32(100), -1
	for i, hs := range sets {
		if firstNonEmpty == -1 && hs.hosts != 0 {
			firstNonEmpty = i
		}
		healthyLoad[i] = uint32(100 * hs.hosts / total)
		degradedLoad[i] = 0
		load -= healthyLoad[i]
	}
	healthyLoad[firstNonEmpty] += load
}

// envoyChoosePriority transcribes LoadBalancerBase::choosePriority.
func envoyChoosePriority(hash uint64, healthyLoad, degradedLoad []uint32) (priority int, degraded bool) {
	hash = hash%100 + 1
	var aggregate uint64
	for p, l := range healthyLoad {
		if aggregate += uint64(l); hash <= aggregate {
			return p, false
		}
	}
	for p, l := range degradedLoad {
		if aggregate += uint64(l); hash <= aggregate {
			return p, true
		}
	}
	return 0, false
}

// TestEnvoyWorkedExample is the example of recalculatePerPriorityState's
// comment: "if there are 3 host sets with 10% / 20% / 10% health and 20% /
// 10% / 0% degraded they will get 16% / 28% / 14% load to healthy hosts and
// 28% / 14% / 0% load to degraded hosts". With the default factor 140, 14
// hosts per priority give those health values (140·1/14 = 10, 140·2/14 = 20).
// Panic is off (threshold 0): with 50 % every priority would be in panic.
func TestEnvoyWorkedExample(t *testing.T) {
	sets := []envoyHostSet{{14, 1, 2}, {14, 2, 1}, {14, 1, 0}}
	h, d, _ := envoyLoads(sets, 140, 0)
	wantH, wantD := []uint32{16, 28, 14}, []uint32{28, 14, 0}
	if !slices.Equal(h, wantH) || !slices.Equal(d, wantD) {
		t.Fatalf("oracle: healthy %v degraded %v, want %v and %v", h, d, wantH, wantD)
	}
	var l Loads
	l.N = 3
	for p, hs := range sets {
		l.Counts[p] = PriorityCounts{Healthy: uint32(hs.healthy), Degraded: uint32(hs.degraded), Total: uint32(hs.hosts)}
	}
	l.distribute(140, 0)
	if got := []uint32{uint32(l.Healthy[0]), uint32(l.Healthy[1]), uint32(l.Healthy[2])}; !slices.Equal(got, wantH) {
		t.Fatalf("shared: healthy %v, want %v", got, wantH)
	}
	if got := []uint32{uint32(l.Degraded[0]), uint32(l.Degraded[1]), uint32(l.Degraded[2])}; !slices.Equal(got, wantD) {
		t.Fatalf("shared: degraded %v, want %v", got, wantD)
	}
}

// oracleEndpoint is one endpoint of the oracle's lists.
type oracleEndpoint struct {
	addr  string
	state int // 0 healthy, 1 degraded, 2 unhealthy (as Envoy counts them)
	rank  int
}

// oraclePriority is one priority of the oracle: its rank, Envoy's loads and
// panic flag, and the addresses Envoy would choose among for a healthy, a
// degraded and a panic pick (hostSourceToUse: HealthyHosts, DegradedHosts,
// AllHosts).
type oraclePriority struct {
	rank                    int
	failover                int // 0: no failover rule applies; 1: the rule's to-region; 2: the other regions
	healthyLoad, degrLoad   uint32
	panic                   bool
	healthy, degraded, all  []string
	nHealthy, nDegr, nTotal int
}

// priorityOracle groups a service's endpoints by rank (Istio's LbPriority
// generalised to the service's scopes: the length of the matching prefix),
// deepest first, skipping empty ranks (Istio's renumbering), and applies
// Envoy's load computation. Under health allow_all every endpoint counts as
// healthy.
//
// Failover transcribes applyLocalityFailover's step 1: "region not match,
// apply failover settings when specified: update localityLbEndpoints'
// priority to 4 if failover not match" — for the first rule whose From is
// the proxy's region, an endpoint outside the proxy's region and outside the
// rule's To drops one priority below those in To. loctree's scopes
// generalise Istio's [region, zone, subzone]: "outside the proxy's region"
// is rank == the index of the region scope (every scope before it matches).
// Each key below is an Istio priority times two, plus one for the demoted
// endpoints; the distinct keys, in order, are the priorities.
func priorityOracle(spec *ServiceSpec, src Locality, of, threshold uint32) []oraclePriority {
	scopes := spec.Scopes
	if len(scopes) == 0 {
		scopes = DefaultScopes()
	}
	regionAt, to := slices.Index(scopes, "region"), ""
	for _, f := range spec.Failover {
		if f.From == src["region"] {
			to = f.To
			break
		}
	}
	byRank := make([][]oracleEndpoint, 2*len(scopes)+2)
	for _, e := range spec.Endpoints {
		rank := istioRank(scopes, e.Locality, src)
		key := 2 * rank
		if regionAt >= 0 && rank == regionAt && to != "" && e.Locality["region"] != to {
			key--
		}
		state := 0
		switch {
		case spec.Health == "allow_all":
		case e.Healthy != nil && !*e.Healthy:
			state = 2
		case e.Degraded:
			state = 1
		}
		ap := netip.MustParseAddrPort(e.Address)
		addr := netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String()
		byRank[key+1] = append(byRank[key+1], oracleEndpoint{addr: addr, state: state, rank: rank})
	}
	var out []oraclePriority
	var sets []envoyHostSet
	for key := len(byRank) - 1; key >= 0; key-- {
		if len(byRank[key]) == 0 {
			continue
		}
		rank := key / 2 // stored at 2·rank+1, or 2·rank when demoted
		p := oraclePriority{rank: rank}
		if regionAt >= 0 && rank == regionAt && to != "" {
			p.failover = 1 + (key+1)%2
		}
		for _, e := range byRank[key] {
			p.all = append(p.all, e.addr)
			switch e.state {
			case 0:
				p.healthy = append(p.healthy, e.addr)
			case 1:
				p.degraded = append(p.degraded, e.addr)
			}
		}
		p.nHealthy, p.nDegr, p.nTotal = len(p.healthy), len(p.degraded), len(p.all)
		for _, s := range [][]string{p.healthy, p.degraded, p.all} {
			slices.Sort(s)
		}
		out = append(out, p)
		sets = append(sets, envoyHostSet{hosts: p.nTotal, healthy: p.nHealthy, degraded: p.nDegr})
	}
	if len(out) == 0 {
		return nil
	}
	h, d, panic := envoyLoads(sets, of, threshold)
	for i := range out {
		out[i].healthyLoad, out[i].degrLoad, out[i].panic = h[i], d[i], panic[i]
	}
	return out
}

// istioRank transcribes the matching of applyFailoverPriorityPerLocality
// (istio/istio pilot/pkg/networking/core/loadbalancer/loadbalancer.go) with
// priorityLabelOverrides: a label "k=v" compares the endpoint's k with v
// ("valueForProxy, ok := priorityLabelOverrides[label]"), any other label
// the endpoint's value with the proxy's; the first mismatch at j gives
// priority len−j. The rank returned is the number of leading matches
// (len − priority).
func istioRank(labels []string, ep, proxy Locality) int {
	for j, label := range labels {
		name, override, ok := strings.Cut(label, "=")
		valueForProxy := proxy[label]
		if ok {
			valueForProxy = override
		}
		if valueForProxy != ep[name] {
			return j
		}
	}
	return len(labels)
}

// randomSpilloverTopology is randomTopology with degraded endpoints, mode
// failover and a random overprovisioning factor and panic threshold.
func randomSpilloverTopology(rng *rand.Rand) (*Topology, uint32, uint32) {
	top := randomTopology(rng)
	spec := &top.Services[0]
	spec.Mode = ""
	of := []uint32{140, 140, 100, 200, 50, 1, 1000, 65535}[rng.IntN(8)]
	threshold := []uint32{50, 50, 0, 100, 30, 75}[rng.IntN(6)]
	if rng.IntN(10) == 0 {
		threshold = uint32(rng.IntN(101))
	}
	spec.Spillover = &SpilloverSpec{OverprovisioningFactor: &of, PanicThreshold: &threshold}
	for i := range spec.Endpoints {
		e := &spec.Endpoints[i]
		if (e.Healthy == nil || *e.Healthy) && rng.IntN(4) == 0 {
			e.Degraded = true
		}
	}
	if len(spec.Scopes) > 1 {
		// region first, as Istio's locality failover: network last, which
		// keeps the network rule (network_priority_oracle_test.go) out
		spec.Scopes = append(slices.Clone(spec.Scopes[1:]), spec.Scopes[0])
	}
	withOverride(rng, spec)
	if slices.Contains(spec.Scopes, "region") && rng.IntN(2) == 0 {
		// regions are region-1..3 (randomTopology); a source may have 4
		for from := 1; from <= 4; from++ {
			if rng.IntN(2) == 0 {
				spec.Failover = append(spec.Failover, FailoverSpec{From: fmt.Sprintf("region-%d", from), To: fmt.Sprintf("region-%d", 1+(from+rng.IntN(2))%3)})
			}
		}
	}
	return top, of, threshold
}

// addrsOf lists the addresses of the endpoints in spans.
func addrsOf(t *Tree, spans []Span) []string {
	out := []string{}
	for _, s := range spans {
		for i := s.Lo; i < s.Hi; i++ {
			out = append(out, t.Endpoint(i).Addr.String())
		}
	}
	slices.Sort(out)
	return out
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// TestLoadsMatchEnvoyOracle: for random topologies (healthy, degraded and
// unhealthy endpoints, random factor and threshold) and sources, shared's
// per-priority ranks, counts, loads, panic flags and candidate sets equal
// the oracle's.
func TestLoadsMatchEnvoyOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	const topologies, sources = 6000, 4
	var seen struct{ spill, degraded, panic, totalPanic, allToP0, failoverTo, failoverRest int }
	defer func() {
		t.Logf("cases: %+v", seen)
		if seen.spill < 1000 || seen.degraded < 1000 || seen.panic < 1000 || seen.totalPanic < 100 || seen.allToP0 < 100 || seen.failoverTo < 500 || seen.failoverRest < 500 {
			t.Errorf("the random cases miss a branch of Envoy's computation: %+v", seen)
		}
	}()
	for it := range topologies {
		top, of, threshold := randomSpilloverTopology(rng)
		tree, err := Build(top, BuildOptions{Generation: uint64(it)})
		if err != nil {
			t.Fatalf("topology %d: %v", it, err)
		}
		spec := &top.Services[0]
		svc := tree.Services()[0]
		for range sources {
			src := randomSource(rng, spec.Scopes)
			want := priorityOracle(spec, src, of, threshold)
			l := svc.Loads(src)
			if err := compareLoads(tree, &l, want); err != nil {
				t.Fatalf("topology %d (of %d, panic %d), source %v: %v\n%+v", it, of, threshold, src, err, spec)
			}
			countCases(&seen, &l)
		}
	}
}

func compareLoads(tree *Tree, l *Loads, want []oraclePriority) error {
	if l.N != len(want) {
		return fmt.Errorf("%d priorities, oracle %d", l.N, len(want))
	}
	for p, w := range want {
		c := l.Counts[p]
		switch {
		case int(l.Rank[p]) != w.rank || int(l.Failover[p]) != w.failover:
			return fmt.Errorf("priority %d: rank %d failover %d, oracle %d and %d", p, l.Rank[p], l.Failover[p], w.rank, w.failover)
		case int(c.Healthy) != w.nHealthy || int(c.Degraded) != w.nDegr || int(c.Total) != w.nTotal:
			return fmt.Errorf("priority %d: counts %+v, oracle %d/%d/%d", p, c, w.nHealthy, w.nDegr, w.nTotal)
		case uint32(l.Healthy[p]) != w.healthyLoad || uint32(l.Degraded[p]) != w.degrLoad || l.InPanic(p) != w.panic:
			return fmt.Errorf("priority %d: load %d/%d panic %v, oracle %d/%d panic %v", p, l.Healthy[p], l.Degraded[p], l.InPanic(p), w.healthyLoad, w.degrLoad, w.panic)
		}
		for k, set := range []struct {
			got  []Span
			want []string
		}{{l.healthySpans(p), w.healthy}, {l.degradedSpans(p), w.degraded}, {l.allSpans(p), w.all}} {
			if got := addrsOf(tree, set.got); !slices.Equal(got, orEmpty(set.want)) {
				return fmt.Errorf("priority %d: set %d is %v, oracle %v", p, k, got, set.want)
			}
		}
	}
	return nil
}

func countCases(seen *struct{ spill, degraded, panic, totalPanic, allToP0, failoverTo, failoverRest int }, l *Loads) {
	if l.N > 1 && l.Healthy[0] < 100 {
		seen.spill++
	}
	all := true
	for p := range l.N {
		if l.Degraded[p] > 0 {
			seen.degraded++
		}
		if l.InPanic(p) {
			seen.panic++
		}
		switch l.Failover[p] {
		case 1:
			seen.failoverTo++
		case 2:
			seen.failoverRest++
		}
		all = all && l.InPanic(p)
	}
	if l.N > 0 && all {
		seen.totalPanic++
	}
	if l.N > 0 && l.Healthy[0] == 100 {
		seen.allToP0++
	}
}
