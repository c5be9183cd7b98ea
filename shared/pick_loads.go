package shared

import (
	"math"
	"sync/atomic"
)

// PickLoads picks one endpoint as Envoy does with priority loads: a priority
// and healthy or degraded by choosePriority (the service's consistent_hash
// uses key for it, as Envoy's hash-based balancers use the request hash;
// the other policies a random number), then, within that priority's healthy
// or degraded endpoints, or all of them in panic (hostSourceToUse), one
// endpoint by the service's policy. A priority's endpoints are up to two
// spans per set (six in panic): random, weighted, round_robin,
// least_request and least_connections treat them as one list;
// consistent_hash is weighted rendezvous over all of them. It returns false when l has no priority, l or s is of another
// tree, or the chosen set is empty (Envoy: no host). It allocates nothing,
// but for the first pick of a candidate list with a schedule (edf.go).
func (p *Picker) PickLoads(s *Service, l *Loads, key uint64) (uint32, bool) {
	if s.tree != p.tree || l.tree != p.tree || l.N <= 0 || l.N > MaxPriorities {
		return 0, false
	}
	p.needs(s.policy)
	h := key
	if s.policy != PolicyConsistentHash {
		h = p.src.next()
	}
	pr, degraded := l.choose(h)
	if l.NTargets > 0 {
		return p.pickTarget(s, l, degraded, key)
	}
	if int(l.Rank[pr]) > MaxLevels {
		return 0, false
	}
	set := setEligible
	if degraded {
		set = setDegraded
	}
	var u spanSet
	if l.InPanic(pr) {
		for k := range numSets {
			u.add(l.spans(k, pr))
		}
	} else {
		if s.locDepth > int(l.Rank[pr]) {
			if loc, ok := p.chooseLocality(s, l, pr, set, h); ok {
				return p.pool.pick(s.policy, loc.span.Lo, loc.span.Hi, key, p.src, &p.rr[loc.node]), true
			}
		}
		u.add(l.spans(set, pr))
	}
	if u.total == 0 || int(u.hi) > p.n {
		return 0, false
	}
	rr := &p.rr[l.node[setEligible][l.Rank[pr]]]
	if l.Other(pr) { // an aux node: after the tree's nodes
		rr = &p.rr[p.tree.NumNodes()+int(l.node[numSets*int(l.Group[pr])][l.Rank[pr]])]
	}
	if u.n == 1 {
		return p.pool.pick(s.policy, u.s[0].Lo, u.s[0].Hi, key, p.src, rr), true
	}
	return p.pool.pickSpans(s.policy, &u, key, p.src, rr), true
}

// chooseLocality draws the locality of priority pr in set, for a service
// that draws one (locality.go), from h, the number that chose the
// priority: consistent_hash mixes it (the key) as targetDraw does; the
// other policies use h as it is: its remainder mod 100 chose the priority,
// and its high bits (in effect its quotient by 100, independent of the
// remainder) draw the locality by Lemire's multiply-shift, so that one
// random number serves both draws.
func (p *Picker) chooseLocality(s *Service, l *Loads, pr, set int, h uint64) (*localityRec, bool) {
	if s.policy == PolicyConsistentHash {
		h = mix64(h ^ 0x6a09e667f3bcc909)
	}
	loc, ok := s.chooseLocality(l, pr, set, h)
	if !ok || int(loc.span.Hi) > p.n || int(loc.node) >= len(p.rr) || loc.span.Hi <= loc.span.Lo {
		return nil, false
	}
	return loc, true
}

// pickTarget picks for a service with distribute rules: in panic, among
// all the endpoints of the targets (Envoy's all hosts, without
// localities); else a locality of the rule's targets by its effective
// weight for the chosen availability (Envoy's locality scheduler over
// Istio's per-locality weights: distribute_locality.go), then an endpoint
// of that locality's healthy or degraded span by the policy; with no
// effective weight, among all the targets' endpoints of that availability
// (Envoy: no scheduler). consistent_hash draws the locality from the key
// too, so a key keeps its endpoint.
func (p *Picker) pickTarget(s *Service, l *Loads, degraded bool, key uint64) (uint32, bool) {
	set := setEligible
	if degraded {
		set = setDegraded
	}
	if l.InPanic(0) {
		return p.pickTargets(s, l, key, numSets)
	}
	loc, ok := s.chooseRuleLocality(l, set, p.targetDraw(s, key))
	if !ok || int(loc.span.Hi) > p.n || int(loc.node) >= len(p.rr) {
		return p.pickTargets(s, l, key, set)
	}
	return p.pool.pick(s.policy, loc.span.Lo, loc.span.Hi, key, p.src, &p.rr[loc.node]), true
}

// pickTargets picks by the policy among the targets' endpoints of one set,
// or of every set (numSets).
func (p *Picker) pickTargets(s *Service, l *Loads, key uint64, set int) (uint32, bool) {
	var u spanSet
	for i := range l.NTargets {
		for k, sp := range l.dist[i].span {
			if set == numSets || k == set {
				u.addSpan(sp)
			}
		}
	}
	return p.pickSet(s, &u, key, &p.rr[s.lay.Root])
}

// targetDraw is the random number that chooses a distribute locality.
func (p *Picker) targetDraw(s *Service, key uint64) uint64 {
	if s.policy == PolicyConsistentHash {
		return mix64(key ^ 0x6a09e667f3bcc909)
	}
	return p.src.next()
}

// pickSet picks by the service's policy among the spans of u; false when
// u is empty.
func (p *Picker) pickSet(s *Service, u *spanSet, key uint64, rr *atomic.Uint64) (uint32, bool) {
	if u.total == 0 || int(u.hi) > p.n {
		return 0, false
	}
	if u.n == 1 {
		return p.pool.pick(s.policy, u.s[0].Lo, u.s[0].Hi, key, p.src, rr), true
	}
	return p.pool.pickSpans(s.policy, u, key, p.src, rr), true
}

// spanSet is up to MaxDistributeTargets·3 non-empty spans (at most six
// without distribute) picked from as one list.
type spanSet struct {
	s     [MaxDistributeTargets * numSets]Span
	n     int
	total uint32
	hi    uint32 // the largest Hi
}

func (u *spanSet) add(spans [3]Span) {
	for _, s := range spans {
		u.addSpan(s)
	}
}

func (u *spanSet) addSpan(s Span) {
	if s.Hi > s.Lo {
		u.s[u.n] = s
		u.n++
		u.total += s.Hi - s.Lo
		u.hi = max(u.hi, s.Hi)
	}
}

// at is the k-th endpoint of the list (k < total).
func (u *spanSet) at(k uint32) uint32 {
	for _, s := range u.s[:u.n] {
		if n := s.Hi - s.Lo; k < n {
			return s.Lo + k
		} else {
			k -= n
		}
	}
	return u.s[u.n-1].Hi - 1
}

// pickSpans applies a policy to the endpoints of several spans.
func (p *pool) pickSpans(pol Policy, u *spanSet, key uint64, src *source, rr *atomic.Uint64) uint32 {
	switch pol {
	case PolicyWeighted:
		return p.pickSpansWeighted(u, src)
	case PolicyRoundRobin, PolicyLeastRequest:
		if p.edf != nil && !p.weightsEqual(u.s[:u.n]) {
			return p.pickEDF(pol, u.s[:u.n], rr, src)
		}
		if pol == PolicyRoundRobin {
			return u.at(uint32((rr.Add(1) - 1) % uint64(u.total)))
		}
		a, b := src.below(u.total), src.below(u.total) // pickTwo
		if p.load(u.at(b)) < p.load(u.at(a)) {
			return u.at(b)
		}
		return u.at(a)
	case PolicyLeastConnections:
		return p.pickSpansLeast(u, src)
	case PolicyConsistentHash:
		return p.pickSpansHash(u, key)
	}
	return u.at(src.below(u.total))
}

// pickSpansLeast is pickLeast over the spans as one list: the fewest in
// flight, ties broken uniformly over all the spans (issue 26 item 1: the
// first span's winner used to win every tie). If the counts change between
// the two passes, it falls back to the first minimum seen.
func (p *pool) pickSpansLeast(u *spanSet, src *source) uint32 {
	best, first, ties := int64(math.MaxInt64), u.s[0].Lo, uint32(0)
	for _, s := range u.s[:u.n] {
		for i := s.Lo; i < s.Hi; i++ {
			switch v := p.load(i); {
			case v < best:
				best, first, ties = v, i, 1
			case v == best:
				ties++
			}
		}
	}
	if ties == 1 {
		return first
	}
	k := src.below(ties)
	for _, s := range u.s[:u.n] {
		for i := s.Lo; i < s.Hi; i++ {
			if p.load(i) <= best {
				if k == 0 {
					return i
				}
				k--
			}
		}
	}
	return first
}

// spanWeight is the sum of the weights of [lo, hi), lo < hi.
func (p *pool) spanWeight(lo, hi uint32) uint64 {
	return p.cumWeight(hi-1) - p.cumWeight(lo) + uint64(p.weight(lo))
}

// pickSpansWeighted draws a span by its weight, then an endpoint in it by
// weight: together, proportional to the endpoint weights.
func (p *pool) pickSpansWeighted(u *spanSet, src *source) uint32 {
	var total uint64
	for _, s := range u.s[:u.n] {
		total += p.spanWeight(s.Lo, s.Hi)
	}
	if total == 0 {
		return u.at(src.below(u.total))
	}
	x := src.below64(total)
	for _, s := range u.s[:u.n] {
		w := p.spanWeight(s.Lo, s.Hi)
		if x < w {
			return p.pickWeightedAt(s.Lo, s.Hi, x)
		}
		x -= w
	}
	return u.s[u.n-1].Hi - 1
}

// pickWeightedAt is the endpoint of [lo, hi) whose slice of the cumulative
// weights holds x (0 <= x < the span's weight).
func (p *pool) pickWeightedAt(lo, hi uint32, x uint64) uint32 {
	target := p.cumWeight(lo) - uint64(p.weight(lo)) + x
	a, b := lo, hi-1
	for a < b {
		mid := a + (b-a)/2
		if p.cumWeight(mid) > target {
			b = mid
		} else {
			a = mid + 1
		}
	}
	return a
}

// pickSpansHash is weighted rendezvous hashing over the spans: each span's
// winner, scored as pickHashWeighted scores (ln(u)/weight), the best wins.
func (p *pool) pickSpansHash(u *spanSet, key uint64) uint32 {
	best, bestS := u.s[0].Lo, math.Inf(-1)
	for _, s := range u.s[:u.n] {
		i := p.pick(PolicyConsistentHash, s.Lo, s.Hi, key, nil, nil)
		w := p.weight(i)
		if w == 0 {
			continue
		}
		if sc := math.Log(unitOpen(mix64(key^p.hashes[i]))) / float64(w); sc > bestS {
			best, bestS = i, sc
		}
	}
	return best
}
