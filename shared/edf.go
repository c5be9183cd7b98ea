package shared

import (
	"math"
	"sync"
	"sync/atomic"
)

// Envoy's round robin and least request pick by an earliest deadline first
// schedule when the weights of the hosts they pick among differ
// (EdfLoadBalancerBase, envoyproxy/envoy
// source/extensions/load_balancing_policies/common/load_balancer_impl.cc at
// e01a970ac688: refresh, chooseHostOnce; the scheduler is
// source/common/upstream/edf_scheduler.h). This file is that schedule: one
// per candidate list (Envoy: per host source), made on its first pick. Slow
// start, which only Envoy has, is left out.

// edfEntry is EdfScheduler's EdfEntry: an endpoint's next deadline and the
// FIFO tie-breaker.
type edfEntry struct {
	deadline float64
	order    uint64
	ep       uint32
}

func (a edfEntry) before(b edfEntry) bool {
	return a.deadline < b.deadline || (a.deadline == b.deadline && a.order < b.order)
}

// edfSchedule is EdfScheduler over the endpoints of some spans.
type edfSchedule struct {
	spans []Span // the candidate list it was made for
	now   float64
	order uint64
	q     []edfEntry // a min-heap by before
}

// edfKey names a schedule: the round-robin slot of the candidates' node and
// a fingerprint of their spans (checked against edfSchedule.spans).
type edfKey struct {
	slot *atomic.Uint64
	fp   uint64
}

// edfTable holds a pool's schedules; a mutex serialises their picks.
type edfTable struct {
	mu sync.Mutex
	m  map[edfKey]*edfSchedule
}

func newEdfTable() *edfTable { return &edfTable{m: map[edfKey]*edfSchedule{}} }

// edfWeight is hostWeight: round robin's is the endpoint weight
// (round_robin_lb.h at 964dd46212f2); least request's is weight / (active +
// 1), Envoy's default active_request_bias of 1.0 (least_request_lb.cc at
// 3b0bcb125b34, least_request_lb.h at 2ed1711dcd31).
func (p *pool) edfWeight(pol Policy, ep uint32) float64 {
	w := float64(p.weight(ep))
	if pol == PolicyLeastRequest {
		w /= float64(max(p.load(ep), 0) + 1)
	}
	return w
}

// pickEDF picks among the endpoints of spans by their schedule, making it
// on first use (refresh: the endpoints added in order, then seed % n picks,
// the seed drawn from src). That start is refresh's path without the
// runtime guard edf_lb_host_scheduler_init_fix; Envoy now starts
// createWithPicks(seed) picks in (edf_scheduler.h, envoyproxy/envoy#31592):
// another start, the same schedule.
func (p *pool) pickEDF(pol Policy, spans []Span, slot *atomic.Uint64, src *source) uint32 {
	t := p.edf
	k := edfKey{slot, spansPrint(spans)}
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.m[k]
	if s == nil || !spansEqual(s.spans, spans) {
		s = p.newSchedule(pol, spans, src.next())
		t.m[k] = s
	}
	return p.pickAndAdd(pol, s)
}

// newSchedule is refresh's add_hosts_source for one candidate list.
func (p *pool) newSchedule(pol Policy, spans []Span, seed uint64) *edfSchedule {
	s := &edfSchedule{spans: append([]Span(nil), spans...)}
	n := uint64(0)
	for _, sp := range spans {
		for ep := sp.Lo; ep < sp.Hi; ep++ {
			s.add(p.edfWeight(pol, ep), ep)
			n++
		}
	}
	for range seed % n {
		p.pickAndAdd(pol, s)
	}
	return s
}

// add inserts ep with deadline now + 1/weight (a weight of 0: never, while
// another endpoint has weight; Envoy's weights are at least 1).
func (s *edfSchedule) add(weight float64, ep uint32) {
	d := math.Inf(1)
	if weight > 0 {
		d = s.now + 1/weight
	}
	s.q = append(s.q, edfEntry{d, s.order, ep})
	s.order++
	s.up(len(s.q) - 1)
}

// pickAndAdd takes the earliest deadline and re-adds its endpoint with its
// weight now (EdfScheduler::pickAndAdd).
func (p *pool) pickAndAdd(pol Policy, s *edfSchedule) uint32 {
	top := s.q[0]
	if !math.IsInf(top.deadline, 1) {
		s.now = top.deadline
	}
	d := math.Inf(1)
	if w := p.edfWeight(pol, top.ep); w > 0 {
		d = s.now + 1/w
	}
	s.q[0] = edfEntry{d, s.order, top.ep}
	s.order++
	s.down(0)
	return top.ep
}

func (s *edfSchedule) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !s.q[i].before(s.q[parent]) {
			return
		}
		s.q[i], s.q[parent] = s.q[parent], s.q[i]
		i = parent
	}
}

func (s *edfSchedule) down(i int) {
	for {
		least, l := i, 2*i+1
		if l < len(s.q) && s.q[l].before(s.q[least]) {
			least = l
		}
		if r := l + 1; r < len(s.q) && s.q[r].before(s.q[least]) {
			least = r
		}
		if least == i {
			return
		}
		s.q[i], s.q[least] = s.q[least], s.q[i]
		i = least
	}
}

func spansPrint(spans []Span) uint64 {
	h := uint64(len(spans))
	for _, s := range spans {
		h = mix64(h ^ uint64(s.Lo)<<32 ^ uint64(s.Hi))
	}
	return h
}

func spansEqual(a, b []Span) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// weightsEqual is hostWeightsAreEqual over the spans.
func (p *pool) weightsEqual(spans []Span) bool {
	w := p.weight(spans[0].Lo)
	for _, s := range spans {
		if p.sameTo[s.Lo] < s.Hi || p.weight(s.Lo) != w {
			return false
		}
	}
	return true
}
