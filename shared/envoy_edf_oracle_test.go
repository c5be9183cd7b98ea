package shared

import (
	"container/heap"
	"fmt"
	"slices"
	"sync"
	"testing"
)

// The oracle of this file is transcribed from Envoy (envoyproxy/envoy), not
// from loctree:
//
//   - source/common/upstream/edf_scheduler.h (the createWithPicks version,
//     after envoyproxy/envoy#31592): add(weight, entry) inserts at deadline
//     current_time + 1/weight with a FIFO order_offset tie-breaker; pickAndAdd
//     pops the earliest deadline (ties: the lower order_offset), sets
//     current_time to it and re-adds the entry with calculate_weight(entry).
//   - source/extensions/load_balancing_policies/common/load_balancer_impl.cc
//     at e01a970ac688 (EdfLoadBalancerBase::refresh, chooseHostOnce): a
//     scheduler per host source only when the hosts' weights are not all
//     equal (hostWeightsAreEqual) and there are two or more; the hosts added
//     in order with hostWeight(host); a start offset of seed_ % hosts.size()
//     picks (the branch without edf_lb_host_scheduler_init_fix; the fixed
//     branch, createWithPicks, starts at seed_ picks into the same schedule).
//     Equal weights pick unweightedHostPick.
//   - round_robin/round_robin_lb.h at 964dd46212f2: hostWeight = weight (slow
//     start ignored: loctree has none); unweightedHostPick = hosts[rr++ % n].
//   - least_request/least_request_lb.cc at 3b0bcb125b34: hostWeight =
//     weight / (rq_active + 1)^active_request_bias, bias 1.0 by default
//     (least_request_lb.h at 2ed1711dcd31, refresh); unweightedHostPickNChoices
//     with choice_count 2: two independent draws random() % n (the same host
//     may be drawn twice), the later replaces the candidate only with strictly
//     fewer active requests.

// envoyEDFEntry is EdfScheduler::EdfEntry.
type envoyEDFEntry struct {
	deadline float64
	order    uint64
	host     int
}

type envoyEDFQueue []envoyEDFEntry

func (q envoyEDFQueue) Len() int { return len(q) }
func (q envoyEDFQueue) Less(i, j int) bool {
	return q[i].deadline < q[j].deadline || (q[i].deadline == q[j].deadline && q[i].order < q[j].order)
}
func (q envoyEDFQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *envoyEDFQueue) Push(x any)   { *q = append(*q, x.(envoyEDFEntry)) }
func (q *envoyEDFQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// envoyEDF is EdfScheduler<Host> over host indices.
type envoyEDF struct {
	now   float64
	order uint64
	q     envoyEDFQueue
}

func (s *envoyEDF) add(weight float64, host int) {
	heap.Push(&s.q, envoyEDFEntry{s.now + 1/weight, s.order, host})
	s.order++
}

func (s *envoyEDF) pickAndAdd(weight func(int) float64) int {
	e := heap.Pop(&s.q).(envoyEDFEntry)
	s.now = e.deadline
	s.add(weight(e.host), e.host)
	return e.host
}

// envoyEdfLB is EdfLoadBalancerBase over one host source: hosts' weights,
// active requests (for least request), the scheduler when weights differ.
type envoyEdfLB struct {
	weights []uint32
	active  []uint64
	lr      bool // least request's hostWeight, else round robin's
	edf     *envoyEDF
	rr      uint64
}

// newEnvoyEdfLB is refresh() with seed_ = seed.
func newEnvoyEdfLB(weights []uint32, lr bool, seed uint64) *envoyEdfLB {
	b := &envoyEdfLB{weights: weights, active: make([]uint64, len(weights)), lr: lr, rr: seed}
	if envoyWeightsEqual(weights) || len(weights) <= 1 {
		return b
	}
	b.edf = &envoyEDF{}
	for h := range weights {
		b.edf.add(b.hostWeight(h), h)
	}
	for range seed % uint64(len(weights)) {
		b.edf.pickAndAdd(b.hostWeight)
	}
	return b
}

func envoyWeightsEqual(w []uint32) bool {
	for _, x := range w {
		if x != w[0] {
			return false
		}
	}
	return true
}

func (b *envoyEdfLB) hostWeight(h int) float64 {
	if !b.lr {
		return float64(b.weights[h])
	}
	return float64(b.weights[h]) / float64(b.active[h]+1)
}

// choose is chooseHostOnce for round robin (the unweighted pick of least
// request is a random draw: envoyP2CShares).
func (b *envoyEdfLB) choose() int {
	if b.edf != nil {
		return b.edf.pickAndAdd(b.hostWeight)
	}
	b.rr++
	return int((b.rr - 1) % uint64(len(b.weights)))
}

// envoyP2CShares is the exact distribution of unweightedHostPickNChoices
// with choice_count 2 over hosts with the given active requests: every pair
// of independent draws (a, b) is equally likely; b wins only with strictly
// fewer active requests.
func envoyP2CShares(active []uint64) []float64 {
	n := len(active)
	shares := make([]float64, n)
	for a := range n {
		for b := range n {
			w := a
			if active[b] < active[a] {
				w = b
			}
			shares[w] += 1 / float64(n*n)
		}
	}
	return shares
}

// TestEnvoyEdfOracleVectors checks the transcription against Envoy's own
// tests: RoundRobinLoadBalancerTest.Weighted
// (test/extensions/load_balancing_policies/round_robin/round_robin_lb_test.cc)
// and LeastRequestLoadBalancerTest.WeightImbalance
// (least_request/least_request_lb_test.cc), both with random() = 0.
func TestEnvoyEdfOracleVectors(t *testing.T) {
	rr := newEnvoyEdfLB([]uint32{1, 2}, false, 0)
	if got := envoyPicks(rr, 6); !slices.Equal(got, []int{1, 0, 1, 1, 0, 1}) {
		t.Fatalf("round robin weights [1 2]: %v, Envoy's test has [1 0 1 1 0 1]", got)
	}
	lr := newEnvoyEdfLB([]uint32{1, 2}, true, 0)
	want := [][]int{{1, 0, 1, 1, 0, 1}, {1, 0, 1, 0, 1}, {0, 1, 1, 1, 0, 1, 1, 1, 1, 0}}
	active := [][]uint64{{0, 0}, {0, 1}, {1, 0}}
	for i, w := range want {
		lr.active = active[i]
		if got := envoyPicks(lr, len(w)); !slices.Equal(got, w) {
			t.Fatalf("least request phase %d (active %v): %v, Envoy's test has %v", i, active[i], got, w)
		}
	}
	shares := envoyP2CShares([]uint64{4, 3, 2, 1})
	for i, w := range []float64{1.0 / 16, 3.0 / 16, 5.0 / 16, 7.0 / 16} {
		if d := shares[i] - w; d > 1e-12 || d < -1e-12 {
			t.Fatalf("P2C shares %v, want [1 3 5 7]/16", shares)
		}
	}
}

func envoyPicks(b *envoyEdfLB, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = b.choose()
	}
	return out
}

// edfWeightCases are weight vectors for the round robin and least request
// comparisons: Envoy's test vector, then unequal weights of several shapes.
var edfWeightCases = [][]uint32{{1, 2}, {5, 1, 3, 1}, {3, 3, 1}, {1, 1, 1, 7}, {100, 1, 10}, {2, 0, 3}}

// TestPickerRoundRobinWeightedFollowsEnvoy: with unequal weights, the
// picker's round robin sequence is Envoy's EDF schedule from one of its start
// offsets (Envoy: seed_ % hosts.size()); with equal weights it rotates.
func TestPickerRoundRobinWeightedFollowsEnvoy(t *testing.T) {
	for _, weights := range edfWeightCases {
		t.Run(fmt.Sprint(weights), func(t *testing.T) {
			tree := pickerTree(t, "round_robin", pickerZone{zone: "b", weights: weights})
			svc, r := pickerRange(t, tree, "b")
			for seed := range uint64(5) {
				p := NewPicker(tree, PickerOptions{Seed: seed + 1})
				n := 6 * int(sumWeights(weights))
				got := make([]int, n)
				for i := range got {
					ep, _ := p.Pick(svc, r, 0)
					got[i] = int(ep - r.Lo)
				}
				envoyMatchSomeOffset(t, weights, false, got, nil)
			}
		})
	}
}

// envoyMatchSomeOffset fails unless Envoy's balancer from some start offset
// makes the picks got; phase, when set, changes the active requests before
// pick i.
func envoyMatchSomeOffset(t *testing.T, weights []uint32, lr bool, got []int, phase func(i int, b *envoyEdfLB)) {
	t.Helper()
	for off := range uint64(len(weights)) {
		b := newEnvoyEdfLB(weights, lr, off)
		ok := true
		for i, g := range got {
			if phase != nil {
				phase(i, b)
			}
			if b.choose() != g {
				ok = false
				break
			}
		}
		if ok {
			return
		}
	}
	t.Fatalf("weights %v: picks %v are Envoy's EDF schedule from no start offset (offset 0 gives %v)",
		weights, got[:min(len(got), 24)], envoyPicks(newEnvoyEdfLB(weights, lr, 0), min(len(got), 24)))
}

// TestPickerLeastRequestWeightedFollowsEnvoy: with unequal weights, least
// request is Envoy's EDF over weight / (active + 1), the weight recomputed
// when the picked host is re-added; the active requests change between
// phases as in Envoy's WeightImbalance test.
func TestPickerLeastRequestWeightedFollowsEnvoy(t *testing.T) {
	for _, weights := range edfWeightCases {
		t.Run(fmt.Sprint(weights), func(t *testing.T) {
			tree := pickerTree(t, "least_request", pickerZone{zone: "b", weights: weights})
			svc, r := pickerRange(t, tree, "b")
			p := NewPicker(tree, PickerOptions{Seed: 9})
			n := len(weights)
			phaseLen := 4 * int(sumWeights(weights))
			active := func(i int) []uint64 { // phase k: endpoint (k-1) % n has k in flight
				a := make([]uint64, n)
				if k := i / phaseLen; k > 0 {
					a[(k-1)%n] = uint64(k)
				}
				return a
			}
			got := make([]int, 4*phaseLen)
			for i := range got {
				if i%phaseLen == 0 {
					setInFlight(p, r, active(i))
				}
				ep, _ := p.Pick(svc, r, 0)
				got[i] = int(ep - r.Lo)
			}
			envoyMatchSomeOffset(t, weights, true, got, func(i int, b *envoyEdfLB) { b.active = active(i) })
		})
	}
}

// setInFlight sets the in-flight counts of r's endpoints.
func setInFlight(p *Picker, r Range, active []uint64) {
	for i, a := range active {
		ep := r.Lo + uint32(i)
		for p.InFlight(ep) > 0 {
			p.Done(ep)
		}
		for range a {
			p.Inc(ep)
		}
	}
}

// TestPickerLeastRequestEqualWeightsIsEnvoyP2C: with equal weights, least
// request is Envoy's N_CHOICES with choice_count 2: two independent draws.
// Loads [4 3 2 1] (LeastRequestLoadBalancerTest.PNC's) give [1 3 5 7]/16;
// two distinct draws would give [0 1 2 3]/6.
func TestPickerLeastRequestEqualWeightsIsEnvoyP2C(t *testing.T) {
	tree := pickerTree(t, "least_request", pickerZone{zone: "b", weights: pickerOnes(4)})
	svc, r := pickerRange(t, tree, "b")
	active := []uint64{4, 3, 2, 1}
	p := NewPicker(tree, PickerOptions{Seed: 11})
	setInFlight(p, r, active)
	counts := pickCounts(t, p, svc, r, 40_000)
	if chi2 := pickerChiSquare(counts, envoyP2CShares(active)); chi2 > pickerChi2Crit[3] {
		t.Fatalf("picks %v with in flight %v: chi-square %.1f > %.3f against Envoy's P2C %v", counts, active, chi2, pickerChi2Crit[3], envoyP2CShares(active))
	}
}

// TestPickLoadsRoundRobinWeightedInPanic: the item 1 topology with weights
// 1..6: in panic the candidates are all six hosts in several spans (healthy,
// degraded, unhealthy); Envoy's round robin over AllHosts is the EDF schedule
// by weight, so every 21 picks (the weights' sum) each host gets its weight,
// up to the schedule's start (±1).
func TestPickLoadsRoundRobinWeightedInPanic(t *testing.T) {
	top := issue26PanicTopology("round_robin")
	for i := range top.Services[0].Endpoints {
		w := uint32(i + 1)
		top.Services[0].Endpoints[i].Weight = &w
	}
	tree := mustBuild(t, top)
	svc := tree.Services()[0]
	l := svc.Loads(Locality{"region": "r3"})
	p := NewPicker(tree, PickerOptions{Seed: 6})
	const cycles = 50
	counts := map[string]int{}
	for range 21 * cycles {
		ep, ok := p.PickLoads(svc, &l, 0)
		if !ok {
			t.Fatal("no pick")
		}
		counts[tree.Endpoint(ep).Addr.String()]++
	}
	for i := range 6 {
		a := fmt.Sprintf("127.0.60.%d:80", i+1)
		if d := counts[a] - (i+1)*cycles; d < -1 || d > 1 {
			t.Fatalf("picks %v: %s got %d, want %d ± 1 (its weight %d per 21 picks)", counts, a, counts[a], (i+1)*cycles, i+1)
		}
	}
}

// TestBalancerRoundRobinWeighted: the plain Balancer follows Envoy too.
func TestBalancerRoundRobinWeighted(t *testing.T) {
	b := NewBalancer(PolicyRoundRobin)
	addrs := balancerAddrs(3)
	for i, a := range addrs {
		if err := b.AddWeighted(a, uint32(1+2*i)); err != nil {
			t.Fatal(err)
		}
	}
	counts := balanceCounts(t, b, 9*100)
	for i, a := range addrs {
		if d := counts[a] - 100*(1+2*i); d < -1 || d > 1 {
			t.Fatalf("weights [1 3 5]: %v, want [100 300 500] ± 1", counts)
		}
	}
}

// TestPickerRoundRobinWeightedConcurrent: picks from several goroutines
// take turns on one schedule, so together they still give every candidate
// its weight per cycle (±1 for the start). Run with -race.
func TestPickerRoundRobinWeightedConcurrent(t *testing.T) {
	weights := []uint32{5, 1, 3, 1}
	tree := pickerTree(t, "round_robin", pickerZone{zone: "b", weights: weights})
	svc, r := pickerRange(t, tree, "b")
	p := NewPicker(tree, PickerOptions{})
	const goroutines, cycles = 4, 100
	counts := make([][]int, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() { counts[g] = pickCounts(t, p, svc, r, cycles*10) })
	}
	wg.Wait()
	for i, w := range weights {
		total := 0
		for g := range goroutines {
			total += counts[g][i]
		}
		if d := total - goroutines*cycles*int(w); d < -1 || d > 1 {
			t.Fatalf("endpoint %d of weight %d picked %d times, want %d ± 1", i, w, total, goroutines*cycles*int(w))
		}
	}
}

// TestPickLoadsLeastRequestInPanicIsEnvoyP2C: in panic the candidates are
// all six hosts of issue 26 item 1's topology, in several spans; with equal
// weights least request is Envoy's P2C over them with independent draws
// (envoyP2CShares), whatever span a host is in.
func TestPickLoadsLeastRequestInPanicIsEnvoyP2C(t *testing.T) {
	tree := mustBuild(t, issue26PanicTopology("least_request"))
	svc := tree.Services()[0]
	l := svc.Loads(Locality{"region": "r3"})
	p := NewPicker(tree, PickerOptions{Seed: 12})
	active := []uint64{5, 4, 3, 2, 1, 0} // by endpoint index, all six in the tree's order
	setInFlight(p, Range{Lo: 0, Hi: 6}, active)
	counts := make([]int, 6)
	for range 60_000 {
		ep, ok := p.PickLoads(svc, &l, 0)
		if !ok || ep >= 6 {
			t.Fatalf("pick %d, %v", ep, ok)
		}
		counts[ep]++
	}
	if chi2 := pickerChiSquare(counts, envoyP2CShares(active)); chi2 > pickerChi2Crit[5] {
		t.Fatalf("picks %v with in flight %v: chi-square %.1f > %.3f against Envoy's P2C %v", counts, active, chi2, pickerChi2Crit[5], envoyP2CShares(active))
	}
}
