package shared

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
)

// Chi-square critical values at p = 0.001 (upper tail), by degrees of
// freedom, from the standard table (e.g. NIST/SEMATECH e-Handbook 1.3.6.7.4).
// A correct picker fails a test with a fixed seed never (the seed is fixed), and
// with a fresh seed about once in a thousand runs.
var pickerChi2Crit = map[int]float64{1: 10.828, 2: 13.816, 3: 16.266, 4: 18.467, 5: 20.515, 6: 22.458, 7: 24.322, 8: 26.124, 9: 27.877, 19: 43.820}

// pickerChiSquare is Pearson's statistic of counts against expected shares.
func pickerChiSquare(counts []int, shares []float64) float64 {
	total, sum := 0, 0.0
	for _, c := range counts {
		total += c
	}
	for _, s := range shares {
		sum += s
	}
	chi2 := 0.0
	for i, c := range counts {
		want := float64(total) * shares[i] / sum
		chi2 += (float64(c) - want) * (float64(c) - want) / want
	}
	return chi2
}

// pickerZone is one locality of a test service: its zone and endpoint weights.
type pickerZone struct {
	zone    string
	weights []uint32
	drop    int // 1 + the index of an endpoint to leave out; 0 keeps all
}

// pickerTree builds service "svc" (scopes [zone]) with the zones' endpoints
// at pickerAddr(zone, i).
func pickerTree(tb testing.TB, policy string, zones ...pickerZone) *Tree {
	tb.Helper()
	spec := ServiceSpec{Name: "svc", Scopes: []string{"zone"}, Policy: policy}
	for z, zn := range zones {
		for i, w := range zn.weights {
			if i == zn.drop-1 {
				continue
			}
			spec.Endpoints = append(spec.Endpoints, EndpointSpec{
				Address:  pickerAddr(z, i),
				Locality: Locality{"zone": zn.zone},
				Weight:   &w,
			})
		}
	}
	tree, err := Build(&Topology{Services: []ServiceSpec{spec}}, BuildOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	return tree
}

// pickerAddr is the address of endpoint i of zone z.
func pickerAddr(z, i int) string { return fmt.Sprintf("127.%d.%d.%d:8080", z+1, i/250, i%250+1) }

// pickerRange looks up svc from a zone and fails if there is no candidate.
func pickerRange(tb testing.TB, tree *Tree, zone string) (*Service, Range) {
	tb.Helper()
	svc, _ := tree.Service("svc")
	r := svc.Lookup(Locality{"zone": zone})
	if r.Len() == 0 {
		tb.Fatalf("no candidate in zone %q", zone)
	}
	return svc, r
}

func pickerOnes(n int) []uint32 {
	w := make([]uint32, n)
	for i := range w {
		w[i] = 1
	}
	return w
}

// withPolicy is a copy of s with another policy (same tree).
func withPolicy(s *Service, p Policy) *Service {
	c := *s
	c.policy = p
	return &c
}

// pickCounts picks n times and counts the picks by position in the range.
func pickCounts(tb testing.TB, p *Picker, s *Service, r Range, n int) []int {
	tb.Helper()
	counts := make([]int, r.Len())
	for range n {
		i, ok := p.Pick(s, r, 0)
		if !ok || i < r.Lo || i >= r.Hi {
			tb.Fatalf("pick %d, %v outside [%d, %d)", i, ok, r.Lo, r.Hi)
		}
		counts[i-r.Lo]++
	}
	return counts
}

func TestPickerRandomUniform(t *testing.T) {
	// Zone "a" comes first so the range under test does not start at the
	// service's first endpoint.
	tree := pickerTree(t, "random", pickerZone{zone: "a", weights: pickerOnes(3)}, pickerZone{zone: "b", weights: pickerOnes(10)})
	svc, r := pickerRange(t, tree, "b")
	counts := pickCounts(t, NewPicker(tree, PickerOptions{Seed: 1}), svc, r, 100_000)
	chi2 := pickerChiSquare(counts, pickerShares(pickerOnes(10)))
	if crit := pickerChi2Crit[9]; chi2 > crit {
		t.Fatalf("random picks %v: chi-square %.2f > %.3f (df 9, p 0.001)", counts, chi2, crit)
	}
}

// TestPickerChiSquareDetectsBias shows the uniformity test above can fail: a
// picker that sends one endpoint 11% instead of 10% of 100,000 picks is
// rejected.
func TestPickerChiSquareDetectsBias(t *testing.T) {
	counts := []int{11_000, 9_889, 9_889, 9_889, 9_889, 9_889, 9_889, 9_889, 9_889, 9_888}
	if chi2 := pickerChiSquare(counts, pickerShares(pickerOnes(10))); chi2 <= pickerChi2Crit[9] {
		t.Fatalf("chi-square %.2f does not reject a 1-point bias", chi2)
	}
}

func pickerShares(w []uint32) []float64 {
	s := make([]float64, len(w))
	for i, x := range w {
		s[i] = float64(x)
	}
	return s
}

func TestPickerWeighted(t *testing.T) {
	tests := []struct {
		name    string
		weights []uint32
	}{
		{"mixed", []uint32{1, 2, 3, 4, 10}},
		{"with-zeros", []uint32{0, 5, 0, 1, 1, 3, 0}},
		{"large", []uint32{1 << 31, 1 << 30, 1 << 30, 1 << 31}},
		{"all-zero-is-uniform", []uint32{0, 0, 0, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tree := pickerTree(t, "weighted", pickerZone{zone: "a", weights: []uint32{7, 1}}, pickerZone{zone: "b", weights: tc.weights})
			svc, r := pickerRange(t, tree, "b")
			counts := pickCounts(t, NewPicker(tree, PickerOptions{Seed: 2}), svc, r, 100_000)
			shares := pickerShares(tc.weights)
			if tc.name == "all-zero-is-uniform" {
				shares = pickerShares(pickerOnes(len(tc.weights)))
			}
			var nz []int
			var nzShares []float64
			for i, s := range shares {
				if s == 0 && counts[i] != 0 {
					t.Fatalf("endpoint %d of weight 0 picked %d times", i, counts[i])
				}
				if s > 0 {
					nz, nzShares = append(nz, counts[i]), append(nzShares, s)
				}
			}
			chi2, df := pickerChiSquare(nz, nzShares), len(nz)-1
			if chi2 > pickerChi2Crit[df] {
				t.Fatalf("weights %v, picks %v: chi-square %.2f > %.3f (df %d, p 0.001)", tc.weights, counts, chi2, pickerChi2Crit[df], df)
			}
		})
	}
}

func TestPickerRoundRobinExact(t *testing.T) {
	tree := pickerTree(t, "round_robin", pickerZone{zone: "a", weights: pickerOnes(3)}, pickerZone{zone: "b", weights: pickerOnes(7)})
	svcA, ra := pickerRange(t, tree, "a")
	_, rb := pickerRange(t, tree, "b")
	p := NewPicker(tree, PickerOptions{})
	const rounds = 1000
	// Interleaved ranges rotate independently (one counter per tree node).
	ca, cb := make([]int, ra.Len()), make([]int, rb.Len())
	for range rounds * ra.Len() * rb.Len() {
		i, _ := p.Pick(svcA, ra, 0)
		ca[i-ra.Lo]++
		j, _ := p.Pick(svcA, rb, 0)
		cb[j-rb.Lo]++
	}
	for _, c := range ca {
		if c != rounds*rb.Len() {
			t.Fatalf("round robin counts a=%v, want each %d", ca, rounds*rb.Len())
		}
	}
	for _, c := range cb {
		if c != rounds*ra.Len() {
			t.Fatalf("round robin counts b=%v, want each %d", cb, rounds*ra.Len())
		}
	}
}

func TestPickerRoundRobinConcurrentExact(t *testing.T) {
	tree := pickerTree(t, "round_robin", pickerZone{zone: "b", weights: pickerOnes(7)})
	svc, r := pickerRange(t, tree, "b")
	p := NewPicker(tree, PickerOptions{})
	const goroutines, perGoroutine = 4, 7 * 500
	counts := make([][]int, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() { counts[g] = pickCounts(t, p, svc, r, perGoroutine) })
	}
	wg.Wait()
	for i := range r.Len() {
		total := 0
		for g := range goroutines {
			total += counts[g][i]
		}
		if total != goroutines*perGoroutine/r.Len() {
			t.Fatalf("endpoint %d picked %d times, want %d", i, total, goroutines*perGoroutine/r.Len())
		}
	}
}

func TestPickerLeastConnections(t *testing.T) {
	tree := pickerTree(t, "least_connections", pickerZone{zone: "a", weights: pickerOnes(2)}, pickerZone{zone: "b", weights: pickerOnes(5)})
	svc, r := pickerRange(t, tree, "b")
	p := NewPicker(tree, PickerOptions{Seed: 3})
	for k, n := range []int{3, 1, 2, 1, 5} {
		for range n {
			p.Inc(r.Lo + uint32(k))
		}
	}
	counts := pickCounts(t, p, svc, r, 2000)
	if counts[0]+counts[2]+counts[4] != 0 || counts[1] < 800 || counts[3] < 800 {
		t.Fatalf("in flight [3 1 2 1 5]: picks %v, want only positions 1 and 3, about evenly", counts)
	}
	p.Inc(r.Lo + 1)
	p.Inc(r.Lo + 1)
	if counts := pickCounts(t, p, svc, r, 100); counts[3] != 100 {
		t.Fatalf("in flight [3 3 2 1 5]: picks %v, want only position 3", counts)
	}
	for range 10 {
		p.Done(r.Lo + 3) // more Done than Inc: the count stops at 0
	}
	if got := p.InFlight(r.Lo + 3); got != 0 {
		t.Fatalf("in flight after extra Done: %d, want 0", got)
	}
}

// pickerCompletion is a request in flight in the load simulation.
type pickerCompletion struct {
	end float64
	ep  uint32
}

type pickerCompletions []pickerCompletion

func (h pickerCompletions) Len() int           { return len(h) }
func (h pickerCompletions) Less(i, j int) bool { return h[i].end < h[j].end }
func (h pickerCompletions) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *pickerCompletions) Push(x any)        { *h = append(*h, x.(pickerCompletion)) }
func (h *pickerCompletions) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// loadStats summarise a simulated load: averaged over arrivals, the largest
// in-flight count of an endpoint and the variance of the counts.
type loadStats struct{ max, variance float64 }

// simulateLoad sends requests with exponential inter-arrival times (mean 1)
// and durations (mean duration) through the picker, counting them with Inc
// and Done, and samples the in-flight counts of the range after each arrival.
func simulateLoad(p *Picker, s *Service, r Range, requests int, duration float64, seed uint64) loadStats {
	rng := rand.New(rand.NewPCG(seed, 99))
	var h pickerCompletions
	var now float64
	var st loadStats
	for range requests {
		now += rng.ExpFloat64()
		for len(h) > 0 && h[0].end <= now {
			p.Done(heap.Pop(&h).(pickerCompletion).ep)
		}
		ep, _ := p.Pick(s, r, 0)
		p.Inc(ep)
		heap.Push(&h, pickerCompletion{now + rng.ExpFloat64()*duration, ep})
		most, sum, sq := int64(0), 0.0, 0.0
		for i := r.Lo; i < r.Hi; i++ {
			n := p.InFlight(i)
			most, sum, sq = max(most, n), sum+float64(n), sq+float64(n*n)
		}
		mean := sum / float64(r.Len())
		st.max += float64(most)
		st.variance += sq/float64(r.Len()) - mean*mean
	}
	st.max /= float64(requests)
	st.variance /= float64(requests)
	return st
}

// TestPickerLeastRequestSpreadsLoad runs the same simulated load (10
// endpoints, 40 requests in flight on average, so 4 per endpoint) through
// random and through P2C. Random's counts spread like a Poisson law (variance
// close to the mean, 4; measured 3.7); P2C's variance is about 1.1 and its
// largest count is about 2 lower. A P2C that compared the same candidate twice,
// or ignored the counts, would behave as random and fail.
func TestPickerLeastRequestSpreadsLoad(t *testing.T) {
	tree := pickerTree(t, "least_request", pickerZone{zone: "b", weights: pickerOnes(10)})
	svc, r := pickerRange(t, tree, "b")
	const requests, duration = 20_000, 40.0
	random := simulateLoad(NewPicker(tree, PickerOptions{Seed: 4}), withPolicy(svc, PolicyRandom), r, requests, duration, 7)
	p2c := simulateLoad(NewPicker(tree, PickerOptions{Seed: 4}), svc, r, requests, duration, 7)
	t.Logf("random: max %.2f, variance %.2f; least_request (P2C): max %.2f, variance %.2f", random.max, random.variance, p2c.max, p2c.variance)
	if p2c.variance > 0.5*random.variance || p2c.max > 0.8*random.max {
		t.Fatalf("P2C (max %.2f, variance %.2f) does not spread load clearly better than random (max %.2f, variance %.2f)", p2c.max, p2c.variance, random.max, random.variance)
	}
}

func TestPickerLeastRequestTwoChoices(t *testing.T) {
	tree := pickerTree(t, "least_request", pickerZone{zone: "b", weights: pickerOnes(2)})
	svc, r := pickerRange(t, tree, "b")
	p := NewPicker(tree, PickerOptions{Seed: 5})
	p.Inc(r.Lo)
	// Envoy's two draws are independent (unweightedHostPickNChoices): the
	// busy one wins only when drawn twice, 1/4 of the picks (it was never
	// picked when loctree drew two distinct candidates).
	counts := pickCounts(t, p, svc, r, 8000)
	if chi2 := pickerChiSquare(counts, []float64{0.25, 0.75}); chi2 > pickerChi2Crit[1] {
		t.Fatalf("picks %v with in flight [1 0]: chi-square %.1f > %.3f against Envoy's [1/4 3/4]", counts, chi2, pickerChi2Crit[1])
	}
}

// hashPicks maps keys to the address picked for them.
func hashPicks(tb testing.TB, tree *Tree, keys int) []string {
	tb.Helper()
	svc, r := pickerRange(tb, tree, "b")
	p := NewPicker(tree, PickerOptions{Seed: 6}) // the seed must not matter
	out := make([]string, keys)
	for k := range out {
		i, ok := p.Pick(svc, r, HashKey(fmt.Sprint("user-", k)))
		if !ok {
			tb.Fatal("no pick")
		}
		out[k] = tree.Endpoint(i).Addr.String()
	}
	return out
}

// TestPickerConsistentHashRemoveOne removes one of K endpoints, either from
// the topology or by setting its weight to 0, and checks that only the keys
// that were on it move (about its share of the keys), and that the same tree
// rebuilt gives the same answers.
func TestPickerConsistentHashRemoveOne(t *testing.T) {
	const k, keys, removed = 20, 20_000, 7
	mixed := make([]uint32, k)
	for i := range mixed {
		mixed[i] = uint32(1 + i%4)
	}
	for _, tc := range []struct {
		name    string
		weights []uint32
		zeroed  bool // weight 0 instead of removal
	}{
		{"equal-weights/removed", pickerOnes(k), false},
		{"equal-weights/weight-0", pickerOnes(k), true},
		{"mixed-weights/removed", mixed, false},
		{"mixed-weights/weight-0", mixed, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			zone := pickerZone{zone: "b", weights: tc.weights}
			before := hashPicks(t, pickerTree(t, "consistent_hash", zone), keys)
			again := hashPicks(t, pickerTree(t, "consistent_hash", zone), keys)
			if tc.zeroed {
				zone.weights = append([]uint32(nil), tc.weights...)
				zone.weights[removed] = 0
			} else {
				zone.drop = removed + 1
			}
			after := hashPicks(t, pickerTree(t, "consistent_hash", zone), keys)
			gone := pickerAddr(0, removed)
			moved, onGone := 0, 0
			for i := range before {
				if before[i] != again[i] {
					t.Fatalf("key %d: %s, then %s on a rebuilt tree", i, before[i], again[i])
				}
				if before[i] == gone {
					onGone++
				}
				if before[i] != after[i] {
					moved++
					if before[i] != gone {
						t.Fatalf("key %d moved from %s (not removed) to %s", i, before[i], after[i])
					}
				}
			}
			share := float64(tc.weights[removed]) / float64(sumWeights(tc.weights))
			frac := float64(moved) / keys
			t.Logf("removed 1 of %d (share %.3f): %.4f of keys moved", k, share, frac)
			if moved != onGone || frac < 0.7*share || frac > 1.3*share {
				t.Fatalf("%d keys moved, %d were on the removed endpoint: %.4f, want about %.4f", moved, onGone, frac, share)
			}
		})
	}
}

// TestPickerConsistentHashIgnoresHealth flips endpoints' health in a service
// with health allow_all: the candidates stay the same, and so must every key's
// endpoint.
func TestPickerConsistentHashIgnoresHealth(t *testing.T) {
	build := func(unhealthy map[int]bool) []string {
		spec := ServiceSpec{Name: "svc", Scopes: []string{"zone"}, Policy: "consistent_hash", Health: "allow_all"}
		for i := range 12 {
			healthy := !unhealthy[i]
			spec.Endpoints = append(spec.Endpoints, EndpointSpec{Address: pickerAddr(0, i), Locality: Locality{"zone": "b"}, Healthy: &healthy})
		}
		tree, err := Build(&Topology{Services: []ServiceSpec{spec}}, BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return hashPicks(t, tree, 2000)
	}
	before, after := build(nil), build(map[int]bool{1: true, 5: true, 6: true})
	for i := range before {
		if before[i] != after[i] {
			t.Fatalf("key %d moved from %s to %s when health flags changed", i, before[i], after[i])
		}
	}
}

func sumWeights(w []uint32) uint64 {
	var s uint64
	for _, x := range w {
		s += uint64(x)
	}
	return s
}

func TestPickerConsistentHashFollowsWeights(t *testing.T) {
	weights := []uint32{1, 2, 3, 4}
	tree := pickerTree(t, "consistent_hash", pickerZone{zone: "b", weights: weights})
	counts := map[string]int{}
	for _, a := range hashPicks(t, tree, 40_000) {
		counts[a]++
	}
	got := make([]int, len(weights))
	for i := range weights {
		got[i] = counts[pickerAddr(0, i)]
	}
	if chi2 := pickerChiSquare(got, pickerShares(weights)); chi2 > pickerChi2Crit[3] {
		t.Fatalf("keys per endpoint %v for weights %v: chi-square %.2f > %.3f", got, weights, chi2, pickerChi2Crit[3])
	}
}

func TestPickerSeedDeterministic(t *testing.T) {
	tree := pickerTree(t, "random", pickerZone{zone: "b", weights: pickerOnes(50)})
	svc, r := pickerRange(t, tree, "b")
	seq := func(seed uint64) []uint32 {
		p := NewPicker(tree, PickerOptions{Seed: seed})
		out := make([]uint32, 100)
		for i := range out {
			out[i], _ = p.Pick(svc, r, 0)
		}
		return out
	}
	a, b, c := seq(42), seq(42), seq(43)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatal("the same seed gave two sequences")
	}
	if fmt.Sprint(a) == fmt.Sprint(c) {
		t.Fatal("seeds 42 and 43 gave the same sequence")
	}
}

func TestPickerRejectsForeignRanges(t *testing.T) {
	tree := pickerTree(t, "random", pickerZone{zone: "b", weights: pickerOnes(3)})
	other := pickerTree(t, "random", pickerZone{zone: "b", weights: pickerOnes(3)})
	svc, r := pickerRange(t, tree, "b")
	otherSvc, _ := other.Service("svc")
	p := NewPicker(tree, PickerOptions{})
	for name, c := range map[string]struct {
		s *Service
		r Range
	}{
		"empty":          {svc, Range{Lo: 1, Hi: 1}},
		"beyond":         {svc, Range{Lo: 0, Hi: 4}},
		"bad node":       {svc, Range{Lo: 0, Hi: 1, Node: 99}},
		"other tree":     {otherSvc, r},
		"inverted range": {svc, Range{Lo: 2, Hi: 1}},
	} {
		if i, ok := p.Pick(c.s, c.r, 0); ok {
			t.Errorf("%s: picked %d, want no pick", name, i)
		}
	}
}

func TestPickerConcurrent(t *testing.T) {
	tree := pickerTree(t, "random", pickerZone{zone: "b", weights: pickerOnes(8)})
	svc, r := pickerRange(t, tree, "b")
	p := NewPicker(tree, PickerOptions{Seed: 9})
	var wg sync.WaitGroup
	for pol := range PolicyConsistentHash + 1 {
		s := withPolicy(svc, pol)
		wg.Go(func() {
			for k := range 2000 {
				i, ok := p.Pick(s, r, uint64(k))
				if !ok || i < r.Lo || i >= r.Hi {
					t.Errorf("%s: pick %d %v", pol, i, ok)
					return
				}
				p.Inc(i)
				p.Done(i)
			}
		})
	}
	wg.Wait()
	for i := r.Lo; i < r.Hi; i++ {
		if n := p.InFlight(i); n != 0 {
			t.Fatalf("endpoint %d: %d in flight after balanced Inc/Done", i, n)
		}
	}
}

// TestPickerZeroAllocs asserts that Pick does not allocate, for every policy
// and both random sources.
func TestPickerZeroAllocs(t *testing.T) {
	tree := pickerTree(t, "random", pickerZone{zone: "a", weights: pickerOnes(4)}, pickerZone{zone: "b", weights: []uint32{1, 2, 3, 4, 5, 6}})
	svc, r := pickerRange(t, tree, "b")
	for _, seed := range []uint64{0, 1} {
		p := NewPicker(tree, PickerOptions{Seed: seed})
		for pol := range PolicyConsistentHash + 1 {
			s := withPolicy(svc, pol)
			key := uint64(0)
			allocs := testing.AllocsPerRun(1000, func() {
				key++
				i, _ := p.Pick(s, r, key)
				p.Inc(i)
				p.Done(i)
			})
			if allocs != 0 {
				t.Errorf("seed %d, %s: %.1f allocs per pick, want 0", seed, pol, allocs)
			}
		}
	}
}

// TestHashKeyStable pins HashKey's values (computed independently with a
// Python FNV-1a + splitmix64 finalizer): proxies and agents that hash the
// same request attribute must agree across processes and releases.
func TestHashKeyStable(t *testing.T) {
	for in, want := range map[string]uint64{
		"":             0xf52a15e9a9b5e89b,
		"user-42":      0x7a1596f0e94b5793,
		"127.1.2.3":    0xa0258ab025f6cf52,
		"session=abcd": 0x2ef22b8c4e8ad2ca,
	} {
		if got := HashKey(in); got != want {
			t.Errorf("HashKey(%q) = %#x, want %#x", in, got, want)
		}
	}
}

// BenchmarkPicker measures one Pick per policy in a range of n candidates
// (one zone of a service with 10 zones). Weights are equal except for
// policy=weighted and the weights=mixed variant of consistent_hash.
func BenchmarkPicker(b *testing.B) {
	for pol := range PolicyConsistentHash + 1 {
		for _, n := range []int{10, 100, 1000} {
			b.Run(fmt.Sprintf("policy=%s/n=%d", pol, n), func(b *testing.B) {
				benchPicker(b, pol, n, pol == PolicyWeighted)
			})
			if pol == PolicyConsistentHash {
				b.Run(fmt.Sprintf("policy=%s/n=%d/weights=mixed", pol, n), func(b *testing.B) {
					benchPicker(b, pol, n, true)
				})
			}
		}
	}
}

func benchPicker(b *testing.B, pol Policy, n int, mixed bool) {
	weights := pickerOnes(n)
	for i := range weights {
		if mixed {
			weights[i] = uint32(1 + i%3)
		}
	}
	zones := make([]pickerZone, 10)
	for z := range zones {
		zones[z] = pickerZone{zone: fmt.Sprintf("zone-%d", z), weights: weights}
	}
	tree := pickerTree(b, pol.String(), zones...)
	svc, r := pickerRange(b, tree, "zone-5")
	p := NewPicker(tree, PickerOptions{})
	b.ReportAllocs()
	var key uint64
	for b.Loop() {
		key++
		p.Pick(svc, r, key)
	}
}

// FuzzPicker builds a service from fuzzed weights (two zones), picks in one
// zone by every policy and checks the invariants: the pick is inside the
// range; weighted and consistent_hash never pick a weight-0 endpoint while the
// range has weight, nor do round_robin and least_request where the weights
// differ (Envoy's schedule by weight); round robin over equal weights visits
// every candidate once per cycle.
func FuzzPicker(f *testing.F) {
	f.Add([]byte{1, 2, 3, 0, 5}, uint8(2), uint64(7))
	f.Add([]byte{0, 0, 9}, uint8(0), uint64(0))
	f.Add([]byte{255, 1}, uint8(1), uint64(1<<63))
	f.Fuzz(func(t *testing.T, raw []byte, split uint8, key uint64) {
		if len(raw) == 0 || len(raw) > 64 {
			return
		}
		weights := make([]uint32, len(raw))
		for i, b := range raw {
			weights[i] = uint32(b) * uint32(b) * 65537 // up to about 2^32
		}
		cut := int(split) % len(weights)
		zones := []pickerZone{{zone: "a", weights: weights[:cut]}, {zone: "b", weights: weights[cut:]}}
		if cut == 0 {
			zones = zones[1:]
		}
		if sumWeights(weights) == 0 {
			return // Build rejects a service whose weights are all 0
		}
		tree := pickerTree(t, "random", zones...)
		svc, r := pickerRange(t, tree, "b")
		p := NewPicker(tree, PickerOptions{Seed: key | 1})
		rangeWeight := uint64(0)
		for i := r.Lo; i < r.Hi; i++ {
			rangeWeight += uint64(tree.Endpoint(i).Weight)
		}
		for pol := range PolicyConsistentHash + 1 {
			s := withPolicy(svc, pol)
			seen := make([]int, r.Len())
			for k := range r.Len() {
				i, ok := p.Pick(s, r, key+uint64(k))
				if !ok || i < r.Lo || i >= r.Hi {
					t.Fatalf("%s: pick %d, %v outside [%d, %d)", pol, i, ok, r.Lo, r.Hi)
				}
				if pol != PolicyRandom && pol != PolicyLeastConnections && rangeWeight > 0 && tree.Endpoint(i).Weight == 0 && !equalWeights(tree, r) {
					t.Fatalf("%s: picked endpoint %d of weight 0 in a range of weight %d", pol, i, rangeWeight)
				}
				seen[i-r.Lo]++
			}
			if pol == PolicyRoundRobin && equalWeights(tree, r) {
				for k, n := range seen {
					if n != 1 {
						t.Fatalf("round robin: candidate %d picked %d times in one cycle of %d", k, n, r.Len())
					}
				}
			}
		}
	})
}

// equalWeights reports whether the endpoints of r all have one weight.
func equalWeights(tree *Tree, r Range) bool {
	for i := r.Lo; i < r.Hi; i++ {
		if tree.Endpoint(i).Weight != tree.Endpoint(r.Lo).Weight {
			return false
		}
	}
	return true
}

// TestPickerHashesOnlyForConsistentHash: a picker holds the address hashes
// and weight runs (12 bytes an endpoint) only when the tree has a
// consistent_hash service, and a consistent_hash pick on a picker made
// without them (the service's policy changed) still hashes: the same key
// gives the same endpoint.
func TestPickerHashesOnlyForConsistentHash(t *testing.T) {
	top := func(policy string) *Topology {
		svc := ServiceSpec{Name: "svc", Policy: policy}
		for i := range 50 {
			svc.Endpoints = append(svc.Endpoints, EndpointSpec{Address: fmt.Sprintf("127.0.0.%d:80", i+1)})
		}
		return &Topology{Services: []ServiceSpec{svc}}
	}
	if p := NewPicker(mustBuild(t, top("random")), PickerOptions{Seed: 1}); p.pool.hashes != nil || p.pool.sameTo != nil {
		t.Fatal("a tree without consistent_hash got the hash index")
	}
	if p := NewPicker(mustBuild(t, top("consistent_hash")), PickerOptions{Seed: 1}); len(p.pool.hashes) != 50 || len(p.pool.sameTo) != 50 {
		t.Fatal("a consistent_hash tree has no hash index")
	}
	tree := mustBuild(t, top("random"))
	p := NewPicker(tree, PickerOptions{Seed: 1})
	svc := &tree.services[0]
	svc.policy = PolicyConsistentHash
	r := svc.Lookup(nil)
	first, ok := p.Pick(svc, r, 42)
	for range 20 {
		if ep, _ := p.Pick(svc, r, 42); !ok || ep != first {
			t.Fatalf("key 42 picked %d then %d", first, ep)
		}
	}
}

// TestPickerCountsMadeAtFirstInc: a picker makes its in-flight counts (4
// bytes an endpoint) at the first Inc, so a user that never counts goes
// without them; before that every count reads 0 and least_request picks.
func TestPickerCountsMadeAtFirstInc(t *testing.T) {
	svc := ServiceSpec{Name: "svc", Policy: "least_request"}
	for i := range 8 {
		svc.Endpoints = append(svc.Endpoints, EndpointSpec{Address: fmt.Sprintf("127.0.0.%d:80", i+1)})
	}
	tree := mustBuild(t, &Topology{Services: []ServiceSpec{svc}})
	p := NewPicker(tree, PickerOptions{Seed: 1})
	s := &tree.services[0]
	r := s.Lookup(nil)
	p.Done(3) // nothing in flight: no counts made, none below 0
	if _, ok := p.Pick(s, r, 0); !ok || p.pool.counts.Load() != nil || p.InFlight(3) != 0 {
		t.Fatal("counts made before the first Inc, or no pick without them")
	}
	p.Inc(3)
	p.Inc(3)
	p.Done(3)
	if c := p.pool.counts.Load(); c == nil || len(*c) != 8 || p.InFlight(3) != 1 {
		t.Fatalf("after Inc, Inc, Done: in flight %d, want 1", p.InFlight(3))
	}
}
