package shared

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// This file is the oracle of distribute, written from its sources and not
// from loctree's code:
//
//   - Istio (istio/istio at 86c9f01fd735fb01d8192f5bcaf0d424afb7f14c):
//     pilot/pkg/networking/core/loadbalancer/loadbalancer.go,
//     ApplyLocalityLoadBalancer (lines 384-415: distribute, when set, is
//     applied instead of any failover, so every endpoint stays at priority
//     0) and applyLocalityWeights (lines 418-477: the first rule whose from
//     matches the proxy; per to pattern, the not yet matched localities
//     that match it get weight ceil(weight·W_L / ΣW), W_L the locality's
//     weight; localities that match no to lose their endpoints; no matching
//     rule changes nothing); pilot/pkg/networking/util/util.go LocalityMatch
//     (lines 332-343); pilot/pkg/xds/endpoints/endpoint_builder.go lines
//     552-561: W_L is the sum of the locality's endpoint weights.
//   - Envoy (envoyproxy/envoy at e8e02bb2f613f68d4449ebff934fe9bc0a249c93):
//     source/common/upstream/locality_wrr.cc effectiveLocalityWeight (lines
//     84-105: a locality's weight times min(1, factor/100 · eligible/hosts),
//     eligible the healthy hosts for the healthy scheduler and the degraded
//     ones for the degraded scheduler) and rebuildLocalityScheduler (lines
//     25-68: no scheduler when no host is eligible); and
//     load_balancer_impl.cc hostSourceToUse at 00cf9a05, as
//     priority_oracle_test.go cites it (a priority in panic uses all its
//     hosts, without localities; otherwise a locality from the scheduler of
//     the chosen availability). The one priority's loads are envoyLoads
//     (priority_oracle_test.go).

// istioLocality is one locality of the cluster load assignment.
type istioLocality struct {
	region, zone, subzone string
	weight                uint32 // Istio's LoadBalancingWeight
	hosts, healthy, deg   int
}

func (l *istioLocality) key() string { return l.region + "/" + l.zone + "/" + l.subzone }

// istioLocalityMatch transcribes util.LocalityMatch (with
// label.SplitLocalityLabel).
func istioLocalityMatch(region, zone, subzone, rule string) bool {
	items := strings.Split(rule, "/")
	for len(items) < 3 {
		items = append(items, "")
	}
	r, z, s := items[0], items[1], items[2]
	return (r == "*" || region == r) && (z == "*" || z == "" || zone == z) && (s == "*" || s == "" || subzone == s)
}

// distributeOracle returns the share of the source's traffic (0..1) that
// each locality ("region/zone/subzone") gets, when every locality picks
// among its hosts uniformly.
func distributeOracle(spec *ServiceSpec, src Locality, of, threshold uint32) map[string]float64 {
	locs := oracleLocalities(spec)
	keep := applyLocalityWeightsOracle(locs, spec.Distribute, src)
	var p0 envoyHostSet
	for i := range locs {
		if keep[i] {
			p0.hosts += locs[i].hosts
			p0.healthy += locs[i].healthy
			p0.degraded += locs[i].deg
		}
	}
	out := map[string]float64{}
	if p0.hosts == 0 {
		return out
	}
	hl, dl, panic := envoyLoads([]envoyHostSet{p0}, of, threshold)
	if panic[0] {
		for i := range locs {
			if keep[i] {
				out[locs[i].key()] += float64(hl[0]+dl[0]) / 100 * float64(locs[i].hosts) / float64(p0.hosts)
			}
		}
		return out
	}
	if hl[0]+dl[0] == 0 { // choosePriority's fallback: P0's healthy hosts
		hl[0] = 100
	}
	spreadOracle(out, locs, keep, float64(hl[0])/100, of, func(l *istioLocality) int { return l.healthy })
	spreadOracle(out, locs, keep, float64(dl[0])/100, of, func(l *istioLocality) int { return l.deg })
	return out
}

// spreadOracle gives load to the kept localities by their effective weights
// (the locality scheduler of one availability).
func spreadOracle(out map[string]float64, locs []istioLocality, keep []bool, load float64, of uint32, eligible func(*istioLocality) int) {
	eff := make([]float64, len(locs))
	sum := 0.0
	for i := range locs {
		if keep[i] && locs[i].hosts > 0 {
			ratio := float64(eligible(&locs[i])) / float64(locs[i].hosts)
			eff[i] = float64(locs[i].weight) * math.Min(1, float64(of)/100*ratio)
			sum += eff[i]
		}
	}
	for i := range locs {
		if sum > 0 && eff[i] > 0 {
			out[locs[i].key()] += load * eff[i] / sum
		}
	}
}

// oracleLocalities groups the endpoints by locality, in key order.
func oracleLocalities(spec *ServiceSpec) []istioLocality {
	byKey := map[string]*istioLocality{}
	for _, e := range spec.Endpoints {
		l := &istioLocality{region: e.Locality["region"], zone: e.Locality["zone"], subzone: e.Locality["subzone"]}
		if have, ok := byKey[l.key()]; ok {
			l = have
		} else {
			byKey[l.key()] = l
		}
		w := uint32(1)
		if e.Weight != nil {
			w = *e.Weight
		}
		l.weight += w
		l.hosts++
		switch {
		case e.Healthy != nil && !*e.Healthy:
		case e.Degraded:
			l.deg++
		default:
			l.healthy++
		}
	}
	var out []istioLocality
	for _, k := range slices.Sorted(mapKeys(byKey)) {
		out = append(out, *byKey[k])
	}
	return out
}

// applyLocalityWeightsOracle transcribes applyLocalityWeights: it rewrites
// the localities' weights and says which keep their endpoints.
func applyLocalityWeightsOracle(locs []istioLocality, rules []DistributeSpec, src Locality) []bool {
	keep := make([]bool, len(locs))
	for i := range keep {
		keep[i] = true
	}
	for _, rule := range rules {
		if !istioLocalityMatch(src["region"], src["zone"], src["subzone"], rule.From) {
			continue
		}
		misMatched := slices.Clone(keep)
		for pattern, weight := range rule.To {
			dest := map[int]uint32{}
			total := uint32(0)
			for i := range locs {
				if misMatched[i] && istioLocalityMatch(locs[i].region, locs[i].zone, locs[i].subzone, pattern) {
					misMatched[i] = false
					dest[i] = locs[i].weight
					total += dest[i]
				}
			}
			for i, orig := range dest {
				if w := float64(orig*weight) / float64(total); w > 0 {
					locs[i].weight = uint32(math.Ceil(w))
				}
			}
		}
		for i := range misMatched {
			if misMatched[i] {
				keep[i] = false
			}
		}
		break
	}
	return keep
}

// randomDistributeTopology is one spillover service over regions r0..r1,
// zones z0..z1, subzones s0..s1, with one or two distribute rules whose to
// localities are full region/zone/subzone patterns (deep; endpoints of every
// state) or prefixes (every endpoint healthy).
func randomDistributeTopology(rng *rand.Rand, deep bool) (*Topology, uint32, uint32) {
	of := []uint32{140, 100, 200, 110, 1000}[rng.IntN(5)]
	threshold := []uint32{50, 0, 30, 80}[rng.IntN(4)]
	spec := ServiceSpec{Name: "s", Policy: "random", Spillover: &SpilloverSpec{OverprovisioningFactor: &of, PanicThreshold: &threshold}}
	allHealthy := !deep
	for e := range 1 + rng.IntN(40) {
		w := uint32(1 + rng.IntN(3))
		healthy := allHealthy || rng.IntN(4) != 0
		spec.Endpoints = append(spec.Endpoints, EndpointSpec{
			Address: fmt.Sprintf("127.0.1.%d:80", 1+e), Weight: &w, Healthy: &healthy, Degraded: healthy && !allHealthy && rng.IntN(5) == 0,
			Locality: Locality{"region": fmt.Sprintf("r%d", rng.IntN(2)), "zone": fmt.Sprintf("z%d", rng.IntN(2)), "subzone": fmt.Sprintf("s%d", rng.IntN(2))},
		})
	}
	x := rng.IntN(2)
	froms := []string{fmt.Sprintf("r%d/z%d", x, rng.IntN(2)), fmt.Sprintf("r%d", 1-x)}
	if rng.IntN(3) == 0 {
		froms = []string{"*"}
	}
	for _, from := range froms[:1+rng.IntN(len(froms))] {
		spec.Distribute = append(spec.Distribute, DistributeSpec{From: from, To: randomTargets(rng, deep)})
	}
	return &Topology{Services: []ServiceSpec{spec}}, of, threshold
}

// randomTargets are 1..4 non-overlapping patterns with weights summing to
// 100.
func randomTargets(rng *rand.Rand, deep bool) map[string]uint32 {
	var pool []string
	if deep {
		for i := range 8 {
			pool = append(pool, fmt.Sprintf("r%d/z%d/s%d", i/4, i/2%2, i%2))
		}
	} else {
		pool = []string{"r0", "r1/z0", "r1/z1/*"}
	}
	rng.Shuffle(len(pool), func(i, j int) { pool[i], pool[j] = pool[j], pool[i] })
	n := 1 + rng.IntN(min(4, len(pool)))
	to, left := map[string]uint32{}, uint32(100)
	for i, p := range pool[:n] {
		w := left
		if i < n-1 {
			w = 1 + uint32(rng.IntN(int(left)-(n-1-i)))
		}
		to[p] = w
		left -= w
	}
	return to
}

// TestDistributeMatchesIstioEnvoy: for random services and sources, each
// to locality's share of the traffic (Loads.TargetShare) equals the
// Istio+Envoy oracle's (the sum over the localities it matches). With
// full-depth patterns each target is one Istio locality, and the shares are
// equal (up to loctree's 2^-20 fixed point). With prefix patterns and every
// endpoint healthy, they differ only by Istio's rounding up of each
// locality's weight: at most (localities)/(Σ weights) per target.
func TestDistributeMatchesIstioEnvoy(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	var matched, implicit, panics int
	var reused Loads
	for it := range 6000 {
		deep := it%2 == 0
		top, of, threshold := randomDistributeTopology(rng, deep)
		spec := &top.Services[0]
		tree, err := Build(top, BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		svc := tree.Services()[0]
		src := randomSource3(rng)
		l := svc.Loads(src)
		svc.LoadsSource(NewSource(src), &reused) // over the previous case's loads: nothing stale may remain
		if reused.N != l.N || reused.NTargets != l.NTargets || !slices.Equal(reused.Targets[:l.NTargets], l.Targets[:l.NTargets]) || reused.Healthy != l.Healthy {
			t.Fatalf("case %d: loads computed over earlier ones differ: %+v, fresh %+v", it, reused.Targets, l.Targets)
		}
		for i := range l.NTargets {
			if reused.TargetShare(i) != l.TargetShare(i) {
				t.Fatalf("case %d: target %d share %v over earlier loads, %v fresh", it, i, reused.TargetShare(i), l.TargetShare(i))
			}
		}
		want := distributeOracle(spec, src, of, threshold)
		tol := 1e-5
		if !deep {
			weights := 0
			for i := range l.NTargets {
				if l.Targets[i].Counts.Total > 0 {
					weights += int(l.Targets[i].Weight)
				}
			}
			tol = float64(len(oracleLocalities(spec)))/float64(max(weights, 1)) + 1e-9
		}
		for i := range l.NTargets {
			tg := &l.Targets[i]
			w := 0.0
			for key, share := range want {
				parts := strings.Split(key, "/")
				if istioLocalityMatch(parts[0], parts[1], parts[2], tg.Pattern) {
					w += share
				}
			}
			if got := l.TargetShare(i); math.Abs(got-w) > tol {
				t.Fatalf("case %d, %+v from %v (of %d, panic %d): to %q gets %.6f, Istio+Envoy %.6f (all shares %v)",
					it, spec.Distribute, src, of, threshold, tg.Pattern, got, w, want)
			}
		}
		switch {
		case l.Rule > 0:
			matched++
		case l.NTargets > 0:
			implicit++
		}
		if l.InPanic(0) {
			panics++
		}
	}
	if matched < 1000 || implicit < 500 || panics < 100 {
		t.Fatalf("too few cases: %d with a matching rule, %d without, %d in panic", matched, implicit, panics)
	}
}

func randomSource3(rng *rand.Rand) Locality {
	return Locality{"region": fmt.Sprintf("r%d", rng.IntN(3)), "zone": fmt.Sprintf("z%d", rng.IntN(2)), "subzone": fmt.Sprintf("s%d", rng.IntN(2))}
}
