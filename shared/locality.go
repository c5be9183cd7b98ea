package shared

import (
	"math"
	"math/bits"
	"slices"

	"github.com/loctree/loctree/shared/wire"
)

// The locality-weighted choice inside a priority (docs/FORMAT.md, "Priority
// load", step 6; issue 26 item 2). istiod turns Envoy's locality weighted
// load balancing on for a cluster with failover (outlier detection) and
// failover or failoverPriority rules, or with distribute (istio/istio
// pilot/pkg/networking/core/loadbalancer/loadbalancer.go
// LocalityLBSettings.ApplyToCluster at 86c9f01fd735, lines 137-145). Envoy
// then draws a locality of the chosen priority by its effective weight,
// weight · min(1, factor/100 · eligible/hosts) (source/common/upstream/
// locality_wrr.cc effectiveLocalityWeight at e8e02bb2), the weight being
// what istiod sends: the sum of the locality's endpoint weights
// (pilot/pkg/xds/endpoints/endpoint_builder.go generate, lines 552-566),
// and picks by the policy inside it (load_balancer_impl.cc hostSourceToUse
// at 00cf9a05: in panic, all hosts without localities).
//
// A locality is a node of the service's trees at depth locDepth, one past
// the deepest of the scopes region, zone and subzone: a priority of rank r
// below that depth is whole localities (the source's node at depth r
// without its child at r+1), and one of rank r at or past it lies in one
// locality, which needs no draw. The localities' weights and health do not
// depend on the source, so they are computed once per tree: per set
// (eligible, degraded), the localities in endpoint order with the running
// sum of their effective weights; a priority's localities are a few runs of
// them, found by binary search, and the draw is one more.

// localityRec is one locality of one set: its endpoints in the set, its
// node (a Picker's round-robin counter), and the effective weights of the
// set's localities up to and including it.
type localityRec struct {
	span Span
	node uint32 // index into Picker.rr: an eligible node, or NumNodes + an aux node
	cum  uint64
	key  uint64 // a hash of its label path, the same in every set
}

// LocalityWeight is one locality of a set as LocalityWeights lists it: its
// endpoints in the set (absolute indices) and the running sum of the set's
// effective locality weights up to and including it (fixed point).
type LocalityWeight struct {
	Span Span
	Cum  uint64
}

// localityWeighted is ApplyToCluster's condition in loctree's terms: a
// priority load (outlier detection) with failover rules, or with scopes
// other than Istio's default locality failover (a failoverPriority list,
// docs/ISTIO.md), and no distribute rules (their targets are drawn by
// distribute.go).
func (s *Service) localityWeighted() bool {
	if s.overprovision == 0 || len(s.distribute) > 0 || slices.Equal(s.scopes, []string{NoLocalityScope}) {
		return false
	}
	return len(s.failover) > 0 || !slices.Equal(s.scopes, DefaultScopes())
}

// localityDepth is one past the deepest of region, zone and subzone among
// the scopes, or 0.
func localityDepth(scopes []string) int {
	d := 0
	for i, sc := range scopes {
		if sc == "region" || sc == "zone" || sc == "subzone" {
			d = i + 1
		}
	}
	return d
}

// LocalityDepth is the depth of the service's localities when it draws a
// locality inside a priority (priorities of a rank below it), else 0.
func (s *Service) LocalityDepth() int { return s.locDepth }

// LocalityWeights are the localities of the eligible set (or of the
// degraded one) in endpoint order, with their running effective weights:
// what the kernel's draw reads (read-only).
func (s *Service) LocalityWeights(degraded bool) []LocalityWeight {
	recs := s.locs[setEligible]
	if degraded {
		recs = s.locs[setDegraded]
	}
	out := make([]LocalityWeight, len(recs))
	for i, r := range recs {
		out[i] = LocalityWeight{Span: r.span, Cum: r.cum}
	}
	return out
}

// OtherLocalityWeights are LocalityWeights for the other-network trees of
// a service with NetworkPriorities, in endpoint order of the copies.
func (s *Service) OtherLocalityWeights(degraded bool) []LocalityWeight {
	k := locIndex(setEligible, true)
	if degraded {
		k = locIndex(setDegraded, true)
	}
	out := make([]LocalityWeight, len(s.locs[k]))
	for i, r := range s.locs[k] {
		out[i] = LocalityWeight{Span: r.span, Cum: r.cum}
	}
	return out
}

// localityNode is a node at the locality depth of one set's tree.
type localityNode struct {
	path [MaxLevels]uint64
	node uint32
	span Span
}

// localityTotals is one locality over the three sets.
type localityTotals struct {
	weight uint64
	count  [numSets]uint32
}

// precomputeLocalities fills locDepth and locs, and with distribute rules
// their per-rule weights (weighDistribute). The service's trees must be
// checked (Decode) or placed (Builder) first, and its distribute rules'
// loads precomputed (precomputeDistribute). Under the network rule, the
// other-network trees' localities come after (locIndex): their nodes at
// the locality depth are Istio's localities across the other networks, as
// istiod groups endpoints by region/zone/subzone alone (endpoint_builder.go).
func (s *Service) precomputeLocalities() {
	s.locDepth, s.locs, s.locCum, s.distCum = 0, [4][]localityRec{}, [4][]uint64{}, nil
	d := localityDepth(s.scopes)
	if !s.localityWeighted() && len(s.distLoads) == 0 || d == 0 {
		return
	}
	var nodes [numSets][]localityNode
	totals := map[[MaxLevels]uint64]*localityTotals{}
	s.collectSets(&nodes, totals, 0, d)
	s.weighLocalities(&nodes, totals, 0)
	s.locAt = make([]uint32, s.lay.EpTotal+s.netCopies())
	if s.netOther {
		var other [numSets][]localityNode
		otherTotals := map[[MaxLevels]uint64]*localityTotals{}
		s.collectSets(&other, otherTotals, numSets, d)
		s.weighLocalities(&other, otherTotals, 2)
	}
	for k := range s.locs {
		for i, r := range s.locs[k] {
			for e := r.span.Lo; e < r.span.Hi; e++ {
				s.locAt[e-s.lay.EpFirst] = uint32(i)
			}
		}
	}
	s.locDepth = d
	s.weighDistribute(&nodes, totals)
}

// locIndex is where s.locs keeps the localities of set (eligible or
// degraded) in the sets' own trees or in their other-network trees.
func locIndex(set int, other bool) int {
	if other {
		return set + 2
	}
	return set
}

// collectSets collects the localities at depth d of the trees from base
// (the sets' own trees, or their other-network trees) and totals them.
func (s *Service) collectSets(nodes *[numSets][]localityNode, totals map[[MaxLevels]uint64]*localityTotals, base, d int) {
	for set := range numSets {
		root, ok := s.lay.Root, true
		switch {
		case base == numSets:
			root, ok = s.child(base+set, s.lay.NetRoot, uint64(set)+1)
		case set != setEligible:
			root = s.lay.AuxRoot[set-1]
		}
		if !ok {
			continue
		}
		var path [MaxLevels]uint64
		nodes[set] = s.collectLocalities(base+set, root, 0, d, &path, nodes[set])
		for _, n := range nodes[set] {
			t := totals[n.path]
			if t == nil {
				t = &localityTotals{}
				totals[n.path] = t
			}
			t.weight += s.spanWeight(n.span)
			t.count[set] += uint32(n.span.Len())
		}
	}
}

// weighLocalities fills s.locs[at], s.locs[at+1] (the eligible and the
// degraded set) and their running sums from collected localities.
func (s *Service) weighLocalities(nodes *[numSets][]localityNode, totals map[[MaxLevels]uint64]*localityTotals, at int) {
	var sum uint64
	for _, t := range totals {
		sum += t.weight
	}
	shift := max(0, bits.Len64(sum)+bits.Len64(fixedOne)-1-40) // running sums below 2^40
	for set := range setUnhealthy {
		recs := make([]localityRec, len(nodes[set]))
		var cum uint64
		for i, n := range nodes[set] {
			t := totals[n.path]
			cum += localityWeight(s.overprovision, t, set) >> shift
			recs[i] = localityRec{span: n.span, node: n.node, cum: cum, key: pathKey(&n.path) ^ uint64(at)}
			if set != setEligible || at > 0 {
				recs[i].node += uint32(s.tree.NumNodes())
			}
		}
		s.locs[at+set] = recs
		s.locCum[at+set] = make([]uint64, len(recs))
		for i, r := range recs {
			s.locCum[at+set][i] = r.cum
		}
	}
}

// localityWeight is a locality's effective weight for one set (Envoy's
// effectiveLocalityWeight, scaled by fixedOne), its weight Istio's sum of
// its endpoint weights, saturated at 2^32-1 as endpoint_builder.go's
// addUint32 does.
func localityWeight(of uint32, t *localityTotals, set int) uint64 {
	hosts := uint64(t.count[0]) + uint64(t.count[1]) + uint64(t.count[2])
	if hosts == 0 {
		return 0
	}
	ratio := min(fixedOne, uint64(of)*uint64(t.count[set])*fixedOne/(100*hosts))
	return min(t.weight, math.MaxUint32) * ratio
}

// collectLocalities appends the nodes at depth d below n (at depth at) of
// one set's tree, in order, with their label paths.
func (s *Service) collectLocalities(set int, n uint32, at, d int, path *[MaxLevels]uint64, out []localityNode) []localityNode {
	rec := s.nodesOf(set)[int(n)*wire.NodeRecordSize:][:wire.NodeRecordSize]
	if at > 0 {
		path[at-1] = le.Uint64(rec[wire.NLabel:])
	}
	if at == d {
		return append(out, localityNode{path: *path, node: n, span: Span{le.Uint32(rec[wire.NLo:]), le.Uint32(rec[wire.NHi:])}})
	}
	first, count := le.Uint32(rec[wire.NFirstChild:]), le.Uint32(rec[wire.NChildCount:])
	for c := first; c < first+count; c++ {
		out = s.collectLocalities(set, c, at+1, d, path, out)
	}
	return out
}

// pathKey hashes a label path.
func pathKey(p *[MaxLevels]uint64) uint64 {
	var h uint64
	for _, l := range p {
		h = mix64(h ^ l)
	}
	return h
}

// spanWeight is the sum of the endpoint weights of sp (any set).
func (s *Service) spanWeight(sp Span) uint64 {
	if sp.Hi <= sp.Lo {
		return 0
	}
	e := s.tree.eps
	cum := func(i uint32) uint64 { return le.Uint64(e[int(i)*wire.EndpointRecordSize+wire.ECumWeight:]) }
	w := uint64(le.Uint32(e[int(sp.Lo)*wire.EndpointRecordSize+wire.EWeight:]))
	return cum(sp.Hi-1) - cum(sp.Lo) + w
}

// localityRun is the localities [lo, hi) of one set that make up a span.
type localityRun struct{ lo, hi uint32 }

// runOf is the localities of set whose endpoints are the span sp, a
// non-empty union of whole localities (as a priority of rank below
// locDepth is): the localities of its first and its last endpoint.
func (s *Service) runOf(sp Span) localityRun {
	// locAt covers every set's endpoints, each indexing its own localities
	return localityRun{s.locAt[sp.Lo-s.lay.EpFirst], s.locAt[sp.Hi-1-s.lay.EpFirst] + 1}
}

// cumBefore is the running effective weight before locality i of
// s.locs[k] (locIndex).
func (s *Service) cumBefore(k, i int) uint64 {
	if i == 0 {
		return 0
	}
	return s.locs[k][i-1].cum
}

// localityDraw is what a pick needs to draw a locality of one priority in
// one set, computed with the loads (Loads.drawLocalities): the runs of the
// set's localities that make up the priority's spans, the running sum of
// their effective weights at the end of each run (end[2] the total), and
// per run what turns an offset x in [end[k-1], end[k]) into the running
// weight of the set's localities it falls on (modulo 2^64).
type localityDraw struct {
	run [3]localityRun
	end [3]uint64
	adj [3]uint64
}

// drawLocalities fills l.loc for the priorities of s that draw a locality
// (a rank below locDepth, not in panic) in a set that has load (P0's
// healthy set always: choosePriority's fallback when no set has any):
// where the spans come apart in localities is the same for every pick, so
// a pick does one multiply and one search. The others get no weight.
func (l *Loads) drawLocalities(s *Service) {
	for p := range l.N {
		if int(l.Rank[p]) >= s.locDepth || l.InPanic(p) {
			l.loc[p] = [2]localityDraw{}
			continue
		}
		for set, load := range [2]uint8{l.Healthy[p], l.Degraded[p]} {
			d := &l.loc[p][set]
			if load == 0 && (p > 0 || set == setDegraded) {
				d.end[2] = 0
				continue
			}
			var sum uint64
			li := locIndex(set, l.Other(p))
			for k, sp := range l.spans(set, p) {
				r := localityRun{}
				if sp.Hi > sp.Lo {
					r = s.runOf(sp)
				}
				d.run[k], d.adj[k] = r, s.cumBefore(li, int(r.lo))-sum
				sum += s.cumBefore(li, int(r.hi)) - s.cumBefore(li, int(r.lo))
				d.end[k] = sum
			}
		}
	}
}

// chooseLocality draws a locality of priority p in set (a rank below
// locDepth, not in panic) by its effective weight (Envoy's
// chooseHealthyLocality or chooseDegradedLocality) from l's draw table;
// false when it has no effective weight (Envoy: no scheduler) or l is not
// of s.
func (s *Service) chooseLocality(l *Loads, p, set int, draw uint64) (*localityRec, bool) {
	if set > setDegraded {
		return nil, false
	}
	d := &l.loc[p][set]
	if d.end[2] == 0 {
		return nil, false
	}
	x, _ := bits.Mul64(draw, d.end[2]) // uniform in [0, total) (Lemire)
	k := 0
	if x >= d.end[0] {
		k = 1
	}
	if x >= d.end[1] {
		k = 2
	}
	li := locIndex(set, l.Other(p))
	r, cum := d.run[k], s.locCum[li]
	if r.lo >= r.hi || int(r.hi) > len(cum) {
		return nil, false
	}
	t, a, b := x+d.adj[k], r.lo, r.hi-1 // the first with cum > t; b always qualifies
	for a < b {
		if m := a + (b-a)/2; cum[m] > t {
			b = m
		} else {
			a = m + 1
		}
	}
	return &s.locs[li][a], true
}

// LocalityShare is one locality of a priority and the part of the
// priority's healthy and degraded picks it gets.
type LocalityShare struct {
	// Eligible and Degraded are the locality's endpoints in each set.
	Eligible, Degraded Span
	// HealthyShare and DegradedShare are its parts (0..1) of the
	// priority's healthy and degraded load.
	HealthyShare, DegradedShare float64
}

// LocalityShares lists the localities that priority p of l draws among,
// with their shares, or nil when p draws no locality (a service without
// locality weighting, a rank at or past its LocalityDepth, panic).
func (s *Service) LocalityShares(l *Loads, p int) []LocalityShare {
	if p < 0 || p >= l.N || l.InPanic(p) || l.tree != s.tree {
		return nil
	}
	if l.NTargets > 0 {
		return s.distributeShares(l)
	}
	if s.locDepth <= int(l.Rank[p]) {
		return nil
	}
	var out []LocalityShare
	byKey := map[uint64]int{} // a locality's entry in out
	for set := range setUnhealthy {
		var total uint64
		var idx []int
		li := locIndex(set, l.Other(p))
		for _, sp := range l.spans(set, p) {
			if sp.Hi > sp.Lo {
				r := s.runOf(sp)
				for i := r.lo; i < r.hi; i++ {
					idx = append(idx, int(i))
				}
				total += s.cumBefore(li, int(r.hi)) - s.cumBefore(li, int(r.lo))
			}
		}
		for _, k := range idx {
			r := &s.locs[li][k]
			i, ok := byKey[r.key]
			if !ok {
				i = len(out)
				out = append(out, LocalityShare{})
				byKey[r.key] = i
			}
			w := float64(r.cum - s.cumBefore(li, k))
			if set == setEligible {
				out[i].Eligible = r.span
				if total > 0 {
					out[i].HealthyShare = w / float64(total)
				}
			} else {
				out[i].Degraded = r.span
				if total > 0 {
					out[i].DegradedShare = w / float64(total)
				}
			}
		}
	}
	return out
}
