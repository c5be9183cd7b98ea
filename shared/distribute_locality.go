package shared

import (
	"math"
	"math/bits"
)

// Distribute per locality (docs/FORMAT.md "Distribute"; issue 26 item 5).
// Istio's applyLocalityWeights (istio/istio pilot/pkg/networking/core/
// loadbalancer/loadbalancer.go at 86c9f01fd735, lines 418-477, unchanged
// at b6787c126ec0) gives each locality a to pattern matches its own
// weight, ceil(weight · W_L / ΣW) over the pattern's localities, W_L the
// sum of the locality's endpoint weights; Envoy draws a locality by that
// weight times the locality's own health, min(1, factor/100 ·
// eligible/hosts) (source/common/upstream/locality_wrr.cc
// effectiveLocalityWeight at e8e02bb2). A rule's weights do not depend on
// the source beyond which rule applies, so they are computed once per
// tree: per rule and set, the running effective weights of the set's
// localities (0 outside the rule's targets). A target weighs the sum of
// its localities, so drawing a target and then a locality inside it is
// drawing a locality.

// weighDistribute fills s.distCum and every rule's target weights from the
// localities (precomputeLocalities' nodes and totals).
func (s *Service) weighDistribute(nodes *[numSets][]localityNode, totals map[[MaxLevels]uint64]*localityTotals) {
	s.distCum, s.distAlias = nil, nil
	if len(s.distLoads) == 0 {
		return
	}
	s.distCum = make([][2][]uint64, len(s.distLoads))
	s.distAlias = make([][2]aliasTable, len(s.distLoads))
	for k := range s.distLoads {
		rule := &everywhere
		if k < len(s.dist) {
			rule = &s.dist[k]
		}
		w := istioWeights(rule, k == len(s.dist), totals)
		s.distCum[k] = s.distRuleCum(nodes, totals, w)
		for set := range setUnhealthy {
			s.distAlias[k][set] = newAliasTable(deltas(s.distCum[k][set]))
		}
		s.distLoads[k].weighTargets(s, &s.distCum[k])
	}
}

// istioWeights are the weights applyLocalityWeights leaves the localities
// that keep their endpoints (those a target matches); keep: a source no
// rule's from matches, whose localities keep their own weight.
func istioWeights(rule *distRule, keep bool, totals map[[MaxLevels]uint64]*localityTotals) map[[MaxLevels]uint64]uint32 {
	sums := make([]uint32, len(rule.targets))
	for path, t := range totals {
		if i := rule.targetOf(&path); i >= 0 {
			sums[i] += uint32(min(t.weight, math.MaxUint32)) // Istio's uint32 totalWeight
		}
	}
	out := make(map[[MaxLevels]uint64]uint32, len(totals))
	for path, t := range totals {
		i := rule.targetOf(&path)
		switch wl := uint32(min(t.weight, math.MaxUint32)); {
		case i < 0:
		case keep:
			out[path] = wl
		default:
			out[path] = istioDistWeight(wl, rule.targets[i].weight, sums[i])
		}
	}
	return out
}

// istioDistWeight is the weight applyLocalityWeights gives a locality of
// weight wl matched by a to pattern of weight weight whose localities weigh
// total: ceil(float64(wl·weight) / float64(total)), the product and the
// total in uint32 as Istio computes them (a float64 quotient of integers
// below 2^32 is never rounded onto the next integer, so the integer ceiling
// is the same), and wl unchanged when that is not positive (Istio's
// "destWeight > 0"; a total of 0, only by wrapping, divides by zero there:
// loctree keeps wl).
func istioDistWeight(wl, weight, total uint32) uint32 {
	prod := wl * weight
	if prod == 0 || total == 0 {
		return wl
	}
	return uint32((uint64(prod) + uint64(total) - 1) / uint64(total))
}

// targetOf is the target whose pattern holds a locality's label path, or
// -1 (the targets do not overlap: at most one does).
func (r *distRule) targetOf(path *[MaxLevels]uint64) int {
	for i := range r.targets {
		p := &r.targets[i].prefix
		match := true
		for j := range p.n {
			match = match && path[j] == p.labels[j]
		}
		if match {
			return i
		}
	}
	return -1
}

// distRuleCum is one rule's running effective locality weights per set,
// over s.locs[set], below 2^40 as the priority draw's.
func (s *Service) distRuleCum(nodes *[numSets][]localityNode, totals map[[MaxLevels]uint64]*localityTotals, w map[[MaxLevels]uint64]uint32) [2][]uint64 {
	var sum uint64
	for _, x := range w {
		sum += uint64(x)
	}
	shift := max(0, bits.Len64(sum)+bits.Len64(fixedOne)-1-40)
	var out [2][]uint64
	for set := range setUnhealthy {
		out[set] = make([]uint64, len(nodes[set]))
		var cum uint64
		for i, n := range nodes[set] {
			t := *totals[n.path]
			t.weight = uint64(w[n.path])
			cum += localityWeight(s.overprovision, &t, set) >> shift
			out[set][i] = cum
		}
	}
	return out
}

// weighTargets makes each target's effective weights the sums of its
// localities' in the rule's running weights cum.
func (l *Loads) weighTargets(s *Service, cum *[2][]uint64) {
	l.effSum = [2]uint64{}
	for i := range l.NTargets {
		st := &l.dist[i]
		st.effH, st.effD = s.runWeight(cum, setEligible, st.span[setEligible]), s.runWeight(cum, setDegraded, st.span[setDegraded])
		l.effSum[0], l.effSum[1] = l.effSum[0]+st.effH, l.effSum[1]+st.effD
	}
}

// runWeight is the running weight cum gives the localities of one set
// that make up sp (whole localities), 0 for an empty span.
func (s *Service) runWeight(cum *[2][]uint64, set int, sp Span) uint64 {
	if sp.Hi <= sp.Lo {
		return 0
	}
	r := s.runOf(sp)
	return cumAt(cum[set], int(r.hi)) - cumAt(cum[set], int(r.lo))
}

// cumAt is the running weight before locality i (0 for the first).
func cumAt(cum []uint64, i int) uint64 {
	if i == 0 {
		return 0
	}
	return cum[i-1]
}

// ruleIndex is the index into s.distLoads and s.distCum of the rule l
// applies (l.Rule is 1-based, 0 for none).
func (s *Service) ruleIndex(l *Loads) int {
	if l.Rule == 0 {
		return len(s.dist)
	}
	return l.Rule - 1
}

// chooseRuleLocality draws a locality of the targets of l's rule in set by
// its effective weight (0 outside its targets), from the rule's alias
// table: O(1); false when the set has no effective weight (Envoy: no
// scheduler) or no locality data.
func (s *Service) chooseRuleLocality(l *Loads, set int, draw uint64) (*localityRec, bool) {
	k := s.ruleIndex(l)
	if k >= len(s.distAlias) || set > setDegraded {
		return nil, false
	}
	i, ok := s.distAlias[k][set].draw(draw)
	if !ok {
		return nil, false
	}
	return &s.locs[set][i], true
}

// deltas are the weights whose running sums are cum.
func deltas(cum []uint64) []uint64 {
	out := make([]uint64, len(cum))
	for i := range cum {
		out[i] = cum[i] - cumAt(cum, i)
	}
	return out
}

// RuleLocalityWeights are the localities of the eligible set (or the
// degraded one) in endpoint order with the running sum of their effective
// weights under distribute rule k (k = len(Distribute): a source no rule
// applies to), what the kernel's locality draw inside a target reads; nil
// without distribute rules or for k out of range.
func (s *Service) RuleLocalityWeights(k int, degraded bool) []LocalityWeight {
	if k < 0 || k >= len(s.distCum) {
		return nil
	}
	set := setEligible
	if degraded {
		set = setDegraded
	}
	out := make([]LocalityWeight, len(s.locs[set]))
	for i, r := range s.locs[set] {
		out[i] = LocalityWeight{Span: r.span, Cum: s.distCum[k][set][i]}
	}
	return out
}

// distributeShares is LocalityShares for a service with distribute rules:
// the localities of l's targets, each set's share its part of the set's
// effective weights.
func (s *Service) distributeShares(l *Loads) []LocalityShare {
	k := s.ruleIndex(l)
	if k >= len(s.distCum) {
		return nil
	}
	var out []LocalityShare
	byKey := map[uint64]int{}
	for set := range setUnhealthy {
		cum := s.distCum[k][set]
		for i := range l.NTargets {
			sp := l.dist[i].span[set]
			if sp.Hi <= sp.Lo {
				continue
			}
			r := s.runOf(sp)
			for j := r.lo; j < r.hi; j++ {
				out = addShare(out, byKey, &s.locs[set][j], set, cumAt(cum, int(j)+1)-cumAt(cum, int(j)), l.effSum[set])
			}
		}
	}
	return out
}

// addShare adds locality rec's part w of a set's total weight to out.
func addShare(out []LocalityShare, byKey map[uint64]int, rec *localityRec, set int, w, total uint64) []LocalityShare {
	i, ok := byKey[rec.key]
	if !ok {
		i = len(out)
		out = append(out, LocalityShare{})
		byKey[rec.key] = i
	}
	share := 0.0
	if total > 0 {
		share = float64(w) / float64(total)
	}
	if set == setEligible {
		out[i].Eligible, out[i].HealthyShare = rec.span, share
	} else {
		out[i].Degraded, out[i].DegradedShare = rec.span, share
	}
	return out
}
