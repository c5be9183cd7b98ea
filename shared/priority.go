package shared

import "github.com/loctree/loctree/shared/wire"

// MaxPriorities is the largest number of priorities of a source: one per
// match depth, 0..MaxLevels, and one more where a failover rule splits a
// depth in two; under the network rule, the depths 1..MaxLevels on the
// source's network and on the others, each with a failover split; with
// classes before the locality (groups.go), up to 26 (scopes [network,
// cluster, region, zone, subzone] and three more, failover rules: 8 + 8
// own and ranked, 5 per class). Bit p of a 32-bit mask marks panic.
const MaxPriorities = 32

// Span is a contiguous range of endpoints [Lo, Hi) (absolute indices).
type Span struct{ Lo, Hi uint32 }

// Len is the number of endpoints in the span.
func (s Span) Len() int { return int(s.Hi - s.Lo) }

// PriorityCounts are the endpoints of one priority: healthy, degraded, and
// all of them (healthy, degraded and unhealthy).
type PriorityCounts struct{ Healthy, Degraded, Total uint32 }

// The three endpoint sets of a service, each with its own tree.
const (
	setEligible = iota
	setDegraded
	setUnhealthy
	numSets
	// numTrees counts the sets' own trees and their trees of each group of
	// copies (a tree index is set, or numSets·(1 + group) + set:
	// network.go walkOther, groups.go).
	numTrees = numSets * (1 + maxGroups)
)

// Loads is Envoy's per-priority state for one source (docs/FORMAT.md,
// "Priority load"): priority p holds the endpoints whose rank (the length of
// the scope prefix they share with the source) is Rank[p], deepest first,
// and receives Healthy[p] percent of the traffic on its healthy endpoints
// and Degraded[p] percent on its degraded ones; a priority in panic uses all
// its endpoints. A Loads is computed in O(levels) child lookups from the
// trees, without allocating, and is read by Picker.PickLoads.
type Loads struct {
	priorities
	// Rule is k when the service's distribute rule k-1 applies to the
	// source, else 0. A service with distribute rules has one priority
	// (Istio applies no failover then): the endpoints of the rule's
	// Targets, or of every locality when no rule's from matches (one
	// target "*"). NTargets (len(Targets)) is 0 for a service without
	// distribute rules.
	Rule     int
	NTargets int
	Targets  []Target // read-only: shared with the service's precomputed loads

	dist   []targetState // the targets' spans and weights, read-only as Targets
	effSum [2]uint64     // the targets' healthy and degraded effective weights, summed

	// loc is each priority's locality draw in the eligible and degraded
	// sets (locality.go), filled for the priorities that draw one.
	loc [MaxPriorities][2]localityDraw
}

// priorities is the part of Loads every computation of a service without
// distribute rules starts from zero.
type priorities struct {
	N    int // number of priorities; 0: no endpoint to pick
	Rank [MaxPriorities]uint8
	// Failover is 0 for a priority no failover rule touches, 1 for the
	// endpoints of the rule's to-region, 2 for the other regions.
	Failover [MaxPriorities]uint8
	// Group is, for a priority of the copies in the other-value tree, its
	// group from 1 in the service's order (groups.go), else 0: Other.
	Group    [MaxPriorities]uint8
	Counts   [MaxPriorities]PriorityCounts
	Healthy  [MaxPriorities]uint8 // percent
	Degraded [MaxPriorities]uint8 // percent
	panic    uint32               // bit p: priority p is in panic

	tree  *Tree
	path  [numTrees][MaxLevels + 2]Span   // the source's range in each tree at each depth
	node  [numTrees][MaxLevels + 2]uint32 // each tree's node at each depth (the deepest reached below)
	reach [numTrees]int                   // the depth each walk reached
	to    [numTrees]Span                  // a failover rule's to-region in each tree (empty: none)
}

// Other says whether priority p holds copies from the other-value tree:
// endpoints on other networks than the source's (the network rule of a
// spillover service: Istio's failoverPriority network rule, istio/istio
// b6787c12), whose Rank counts network as matched and the scopes after it
// that match; or of another value of a scope before the locality (copies
// by the first scope, a class before the locality: groups.go), whose Rank
// counts the class's scopes as matched.
func (l *Loads) Other(p int) bool { return p >= 0 && p < MaxPriorities && l.Group[p] != 0 }

// InPanic says whether priority p uses all its endpoints (Envoy's
// per-priority panic).
func (l *Loads) InPanic(p int) bool { return p >= 0 && p < 32 && l.panic&(1<<p) != 0 }

// Loads computes the priority loads of a source.
func (s *Service) Loads(src Locality) Loads {
	var labels [MaxLevels]uint64
	for i, sc := range s.scopes {
		labels[i] = Label(src[sc])
	}
	var l Loads
	s.LoadsLabels(labels[:len(s.scopes)], &l)
	return l
}

// LoadsSource is Loads with a prepared source. It does not allocate.
func (s *Service) LoadsSource(src *Source, l *Loads) {
	var labels [MaxLevels]uint64
	s.sourceLabels(src, &labels)
	s.LoadsLabels(labels[:len(s.scopes)], l)
}

// LoadsLabels computes into l the priority loads of a source given as
// labels (as LookupLabels). A service without spillover has one priority,
// Lookup's candidate range, with all the load (none in strict mode without
// a full match).
func (s *Service) LoadsLabels(labels []uint64, l *Loads) {
	if len(s.distLoads) > 0 {
		l.copyDistribute(&s.distLoads[s.ruleFor(labels)])
		return
	}
	l.reset(s.tree)
	l.Rule, l.NTargets, l.Targets, l.dist, l.effSum = 0, 0, nil, nil, [2]uint64{}
	levels := len(s.scopes)
	l.walk(s, setEligible, s.lay.Root, labels, levels)
	if s.overprovision == 0 {
		l.single(s)
		return
	}
	for k, set := range [2]int{setDegraded, setUnhealthy} {
		if lo, hi := s.auxRange(k); lo == hi {
			for j := range levels + 2 {
				l.path[set][j] = Span{lo, lo}
			}
			l.reach[set] = -1 // not walked: no node to search
			continue
		}
		l.walk(s, set, s.lay.AuxRoot[k], labels, levels)
	}
	trees := numSets
	if s.netOther {
		l.walkOther(s, labels, levels)
		trees = numSets * (1 + len(s.groups))
	}
	split := l.failover(s, labels, trees)
	lowest := s.minRank // bounded failover: lower ranks are no priority
	switch {
	case s.classes:
		lowest = s.first // the lower ranks are the classes' priorities
	case s.netOther:
		lowest = 1 // rank 0, the other networks, is their trees' priorities
	}
	l.addRanks(0, levels, lowest, split)
	for g := range s.groups {
		low := 1
		if s.groups[g].ranked && s.classes {
			low = s.first // the ranks below: its classes
		}
		l.addRanks(numSets*(1+g), levels, low, split)
	}
	l.distribute(s.overprovision, s.panicThreshold)
	if s.locDepth > 0 {
		l.drawLocalities(s)
	}
}

// reset starts a computation of the priorities of a tree's service with
// none. A priority's fields are written where it is added (add, single),
// and the walks' ranges by the walks before any read (those of a tree the
// service does not walk, the other-network trees without the network
// rule, are never read): zeroing the whole state cost a tenth of a fresh
// computation.
func (l *Loads) reset(t *Tree) {
	l.N, l.panic, l.tree = 0, 0, t
}

// Priority is the priority that holds endpoint ep (an absolute index, in
// any of the service's three sets), or -1 when none does. With Rank it says
// how deep the source matched a pick.
func (l *Loads) Priority(ep uint32) int {
	if l.NTargets > 0 {
		return l.targetOf(ep)
	}
	for p := range l.N {
		for set := range numSets {
			for _, s := range l.spans(set, p) {
				if ep >= s.Lo && ep < s.Hi {
					return p
				}
			}
		}
	}
	return -1
}

// addRanks appends the priorities of ranks levels down to lowest of the
// trees from base (the sets' own trees, or their other-network trees),
// deepest first, the rank split splits in two by a failover rule.
func (l *Loads) addRanks(base, levels, lowest, split int) {
	other := uint8(base / numSets)
	for r := levels; r >= lowest; r-- {
		h, d, u := l.count(base+setEligible, r), l.count(base+setDegraded, r), l.count(base+setUnhealthy, r)
		if r == split {
			to := l.to[base:]
			th, td, tu := uint32(to[0].Len()), uint32(to[1].Len()), uint32(to[2].Len())
			l.add(r, 1, other, th, td, tu)
			l.add(r, 2, other, h-th, d-td, u-tu)
			continue
		}
		l.add(r, 0, other, h, d, u)
	}
}

// add appends a priority unless it is empty.
func (l *Loads) add(rank int, failover uint8, group uint8, h, d, u uint32) {
	if h+d+u == 0 || l.N == MaxPriorities {
		return
	}
	l.Rank[l.N], l.Failover[l.N], l.Group[l.N] = uint8(rank), failover, group
	l.Counts[l.N] = PriorityCounts{Healthy: h, Degraded: d, Total: h + d + u}
	l.Healthy[l.N], l.Degraded[l.N] = 0, 0 // distribute fills them
	l.N++
}

// failover applies the first failover rule whose from is the source's
// region (Istio's applyLocalityFailover): it finds the rule's to-region among
// the siblings of the source's region in each tree, and returns the depth
// it splits (the region scope's index), or -1.
func (l *Loads) failover(s *Service, labels []uint64, trees int) int {
	if s.regionAt < 0 || len(s.failTo) == 0 {
		return -1
	}
	src := emptyLabel
	if s.regionAt < len(labels) {
		src = labels[s.regionAt]
	}
	k := 0
	for k < len(s.failTo) && s.failTo[k][0] != src {
		k++
	}
	if k == len(s.failTo) {
		return -1
	}
	for set := range trees {
		a := l.path[set][s.regionAt]
		l.to[set] = Span{a.Lo, a.Lo}
		if l.reach[set] < s.regionAt {
			continue
		}
		if c, ok := s.child(set, l.node[set][s.regionAt], s.failTo[k][1]); ok {
			cr := s.nodesOf(set)[int(c)*wire.NodeRecordSize:][:wire.NodeRecordSize]
			l.to[set] = Span{le.Uint32(cr[wire.NLo:]), le.Uint32(cr[wire.NHi:])}
		}
	}
	return s.regionAt
}

// auxRange is the endpoint range of aux tree k (degraded, unhealthy).
func (s *Service) auxRange(k int) (lo, hi uint32) {
	lo = s.lay.EpFirst + s.lay.EpEligible
	if k == 0 {
		return lo, lo + s.lay.EpDegraded
	}
	return lo + s.lay.EpDegraded, s.lay.EpFirst + s.lay.EpTotal
}

// single is the one priority of a service without spillover: the eligible
// endpoints of maximal rank (strict: of full rank).
func (l *Loads) single(s *Service) {
	depth := 0
	for depth < len(s.scopes) && l.path[setEligible][depth+1].Len() > 0 {
		depth++
	}
	n := uint32(l.path[setEligible][depth].Len())
	if n == 0 || (s.mode == ModeStrict && depth < len(s.scopes)) || depth < s.minRank {
		return
	}
	l.N, l.Rank[0], l.Counts[0], l.Healthy[0] = 1, uint8(depth), PriorityCounts{Healthy: n, Total: n}, 100
	l.Failover[0], l.Group[0], l.Degraded[0] = 0, 0, 0
}

// walk follows the source's labels down one tree and records its range at
// every depth; below the deepest match the range is empty (at the deepest
// node's lo), so the ranges nest.
func (l *Loads) walk(s *Service, set int, root uint32, labels []uint64, levels int) {
	nodes := s.nodesOf(set)
	rec := nodes[int(root)*wire.NodeRecordSize:][:wire.NodeRecordSize]
	n, depth := root, 0
	l.path[set][0] = Span{le.Uint32(rec[wire.NLo:]), le.Uint32(rec[wire.NHi:])}
	for ; depth < levels; depth++ {
		want := emptyLabel
		if depth < len(labels) {
			want = labels[depth]
		}
		c, ok := s.child(set, n, want)
		if !ok {
			break
		}
		n, rec = c, nodes[int(c)*wire.NodeRecordSize:][:wire.NodeRecordSize]
		l.path[set][depth+1] = Span{le.Uint32(rec[wire.NLo:]), le.Uint32(rec[wire.NHi:])}
		l.node[set][depth+1] = n
	}
	lo := le.Uint32(rec[wire.NLo:])
	l.node[set][0], l.reach[set] = root, depth
	for j := depth + 1; j <= levels+1; j++ {
		l.path[set][j], l.node[set][j] = Span{lo, lo}, n
	}
}

// count is the number of endpoints of a set whose rank is exactly r.
func (l *Loads) count(set, r int) uint32 {
	return uint32(l.path[set][r].Len() - l.path[set][r+1].Len())
}

// spans returns the endpoints of a set in priority p: the range at depth
// Rank[p] minus the nested range at depth Rank[p]+1 (two spans); with a
// failover rule, the to-region's range (one span), or the rest (three).
func (l *Loads) spans(set, p int) [3]Span {
	set += numSets * int(l.Group[p])
	a, b := l.path[set][l.Rank[p]], l.path[set][l.Rank[p]+1]
	switch to := l.to[set]; {
	case l.Failover[p] == 1:
		return [3]Span{to, {to.Hi, to.Hi}, {to.Hi, to.Hi}}
	case l.Failover[p] == 2 && to.Hi > to.Lo:
		x, y := b, to // the two holes in a, in order (an empty b sits at a.Lo)
		if to.Lo < b.Lo || (to.Lo == b.Lo && to.Hi < b.Hi) {
			x, y = to, b
		}
		return [3]Span{{a.Lo, x.Lo}, {x.Hi, y.Lo}, {y.Hi, a.Hi}}
	}
	return [3]Span{{a.Lo, b.Lo}, {b.Hi, a.Hi}, {a.Hi, a.Hi}}
}

// Spans are the endpoints of priority p in each set (healthy, degraded,
// unhealthy), three spans per set, empty ones included: what a pick of p
// chooses from (docs/FORMAT.md "Priority load", step 6).
func (l *Loads) Spans(p int) [numSets][3]Span {
	var out [numSets][3]Span
	if p < 0 || p >= l.N {
		return out
	}
	for set := range numSets {
		out[set] = l.spans(set, p)
	}
	return out
}

func (l *Loads) healthySpans(p int) []Span {
	s := l.spans(setEligible, p)
	return s[:]
}

func (l *Loads) degradedSpans(p int) []Span {
	s := l.spans(setDegraded, p)
	return s[:]
}

func (l *Loads) allSpans(p int) []Span {
	var out []Span
	for set := range numSets {
		s := l.spans(set, p)
		out = append(out, s[:]...)
	}
	return out
}

// distribute computes the loads from the counts as Envoy's
// recalculatePerPriorityState, recalculatePerPriorityPanic and
// recalculateLoadInTotalPanic do (load_balancer_impl.cc), in integers: a
// priority is in panic when 100·(healthy+degraded) < threshold·total.
func (l *Loads) distribute(of, threshold uint32) {
	if l.N == 0 || l.healthyFirst(of) {
		return
	}
	var health, degraded [MaxPriorities]uint32
	var sum uint32
	for p := range l.N {
		c := l.Counts[p]
		health[p], degraded[p] = availability(of, c.Healthy, c.Total), availability(of, c.Degraded, c.Total)
		sum += health[p] + degraded[p]
	}
	nta := min(sum, 100)
	if nta > 0 {
		firstH, rem := spread(l.Healthy[:l.N], health[:l.N], 100, nta)
		firstD, rem := spread(l.Degraded[:l.N], degraded[:l.N], rem, nta)
		if rem > 0 && firstH >= 0 {
			l.Healthy[firstH] += uint8(rem)
		} else if rem > 0 {
			l.Degraded[firstD] += uint8(rem)
		}
	}
	if threshold == 0 && nta == 0 {
		l.Healthy[0] = 100
		return
	}
	if nta == 100 {
		return
	}
	l.setPanic(threshold)
}

// healthyFirst is the common case of distribute, exactly: if the healthy
// availabilities of the first priorities already sum to 100, the normalized
// total availability is 100, so each of them takes its availability
// (·100/100), the last the remainder, later priorities and every degraded
// load get 0, and no priority is in panic. It reports whether it applied.
func (l *Loads) healthyFirst(of uint32) bool {
	var sum uint32
	for p := range l.N {
		h := availability(of, l.Counts[p].Healthy, l.Counts[p].Total)
		if sum+h >= 100 {
			for q := range p {
				l.Healthy[q] = uint8(availability(of, l.Counts[q].Healthy, l.Counts[q].Total))
			}
			l.Healthy[p] = uint8(100 - sum)
			return true
		}
		sum += h
	}
	return false
}

// availability is Envoy's per-priority health (or degraded) value,
// min(100, of·n/total), and 0 for an empty priority.
func availability(of, n, total uint32) uint32 {
	if total == 0 {
		return 0
	}
	return uint32(min(100, uint64(of)*uint64(n)/uint64(total)))
}

// spread is Envoy's distributeLoad: as much of the load as each priority's
// availability allows, in priority order.
func spread(load []uint8, avail []uint32, total, nta uint32) (first int, rem uint32) {
	first = -1
	for p, a := range avail {
		if first < 0 && a > 0 {
			first = p
		}
		x := min(total, a*100/nta)
		load[p] = uint8(x)
		total -= x
	}
	return first, total
}

// setPanic marks the priorities in panic (an empty one too, as Envoy's
// isHostSetInPanic: 0 % < threshold); if all are, the load follows the host
// counts (Envoy's total panic), the remainder to the first non-empty one.
func (l *Loads) setPanic(threshold uint32) {
	var hosts uint64
	first := -1
	for p := range l.N {
		c := l.Counts[p]
		if (c.Total == 0 && threshold > 0) || 100*(uint64(c.Healthy)+uint64(c.Degraded)) < uint64(threshold)*uint64(c.Total) {
			l.panic |= 1 << p
		}
		if first < 0 && c.Total > 0 {
			first = p
		}
		hosts += uint64(c.Total)
	}
	if l.panic != 1<<l.N-1 {
		return
	}
	if hosts == 0 {
		l.Healthy[0] = 100
		return
	}
	rem := uint64(100)
	for p := range l.N {
		x := 100 * uint64(l.Counts[p].Total) / hosts
		l.Healthy[p], l.Degraded[p] = uint8(x), 0
		rem -= x
	}
	l.Healthy[first] += uint8(rem)
}

// choose is Envoy's choosePriority: hash%100+1 against the cumulative
// healthy loads, then the degraded ones.
func (l *Loads) choose(hash uint64) (p int, degraded bool) {
	h, agg := hash%100+1, uint64(0)
	for p := range l.N {
		if agg += uint64(l.Healthy[p]); h <= agg {
			return p, false
		}
	}
	for p := range l.N {
		if agg += uint64(l.Degraded[p]); h <= agg {
			return p, true
		}
	}
	return 0, false
}
