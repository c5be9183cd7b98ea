package shared

import (
	"fmt"
	"slices"
	"strings"

	"github.com/loctree/loctree/shared/wire"
)

// localityScopes are the scopes a distribute pattern's segments name, in
// order: Istio's locality "region/zone/subzone".
var localityScopes = [...]string{"region", "zone", "subzone"}

// parsePattern reads a distribute pattern as Istio's validateLocalities
// accepts it (pkg/config/validation/agent/validation.go): "region",
// "region/zone" or "region/zone/subzone", no empty segment, at most one
// "*" and only as the last segment; "r/*" is "r" (LocalityMatch ignores a
// missing or "*" segment). It returns the fixed segments, a prefix.
func parsePattern(p string) ([]string, error) {
	if p == "" {
		return nil, fmt.Errorf("empty locality pattern (want region[/zone[/subzone]], a trailing \"/*\", or \"*\")")
	}
	segs := strings.Split(p, "/")
	if len(segs) > len(localityScopes) {
		return nil, fmt.Errorf("locality pattern %q has %d segments (at most region/zone/subzone)", p, len(segs))
	}
	if n := strings.Count(p, "*"); n > 1 || (n == 1 && segs[len(segs)-1] != "*") {
		return nil, fmt.Errorf("locality pattern %q: \"*\" may only be the whole last segment, once", p)
	}
	if segs[len(segs)-1] == "*" {
		segs = segs[:len(segs)-1]
	}
	for _, s := range segs {
		if s == "" {
			return nil, fmt.Errorf("locality pattern %q has an empty segment", p)
		}
		if err := checkText(s); err != nil {
			return nil, fmt.Errorf("locality pattern %q: %w", p, err)
		}
	}
	return segs, nil
}

// overlaps says whether two patterns match a common locality: one's
// segments are a prefix of the other's.
func overlaps(a, b []string) bool {
	n := min(len(a), len(b))
	return slices.Equal(a[:n], b[:n])
}

// builtRule is a validated distribute rule, its targets sorted by pattern.
type builtRule struct {
	from    string
	targets []builtTarget
}

type builtTarget struct {
	pattern string
	weight  uint32
}

// parseDistribute validates Istio's distribute rules as Istio's
// ValidateLocalityLbSetting does (weights 1..100 summing to 100, no
// overlapping localities, not with failover), plus what a tree needs: the
// priority load, and scopes that start with the locality segments the
// patterns use, so that every pattern is one node of the tree.
func (s *builtService) parseDistribute(rules []DistributeSpec, failover int) error {
	if len(rules) == 0 {
		return nil
	}
	switch {
	case len(rules) > MaxDistributeRules:
		return invalid("service %q: %d distribute rules (limit %d)", s.name, len(rules), MaxDistributeRules)
	case failover > 0:
		return invalid("service %q: distribute and failover exclude each other (as in Istio); keep one", s.name)
	case !s.spill:
		return invalid("service %q: distribute needs spillover (the priority load): the plain lookup does not apply distribute", s.name)
	}
	var froms [][]string
	depth := 0
	for i, r := range rules {
		from, err := parsePattern(r.From)
		if err != nil {
			return invalid("service %q: distribute rule %d from: %v", s.name, i+1, err)
		}
		if slices.ContainsFunc(froms, func(o []string) bool { return overlaps(o, from) }) {
			return invalid("service %q: distribute rule %d from %q overlaps an earlier rule's from", s.name, i+1, r.From)
		}
		froms = append(froms, from)
		targets, d, err := parseTargets(r.To)
		if err != nil {
			return invalid("service %q: distribute rule %d (from %q): %v", s.name, i+1, r.From, err)
		}
		depth = max(depth, len(from), d)
		s.distribute = append(s.distribute, builtRule{from: r.From, targets: targets})
	}
	return s.checkLocalityScopes(depth)
}

// parseTargets validates one rule's to: 1..MaxDistributeTargets patterns
// that do not overlap, weights 1..100 summing to 100. It returns them
// sorted by pattern and the deepest pattern's segment count.
func parseTargets(to map[string]uint32) ([]builtTarget, int, error) {
	if len(to) == 0 || len(to) > MaxDistributeTargets {
		return nil, 0, fmt.Errorf("%d to localities (want 1 to %d)", len(to), MaxDistributeTargets)
	}
	var out []builtTarget
	var segs [][]string
	sum, depth := uint32(0), 0
	for _, p := range slices.Sorted(mapKeys(to)) {
		t, err := parsePattern(p)
		if err != nil {
			return nil, 0, fmt.Errorf("to: %w", err)
		}
		if w := to[p]; w < 1 || w > 100 {
			return nil, 0, fmt.Errorf("to %q: weight %d (want 1 to 100)", p, w)
		}
		if i := slices.IndexFunc(segs, func(o []string) bool { return overlaps(o, t) }); i >= 0 {
			return nil, 0, fmt.Errorf("to %q overlaps to %q", p, out[i].pattern)
		}
		segs, sum, depth = append(segs, t), sum+to[p], max(depth, len(t))
		out = append(out, builtTarget{pattern: p, weight: to[p]})
	}
	if sum != 100 {
		return nil, 0, fmt.Errorf("to weights sum to %d (want 100)", sum)
	}
	return out, depth, nil
}

// checkLocalityScopes: patterns with depth segments need the scopes to
// start with region, zone, subzone (that many).
func (s *builtService) checkLocalityScopes(depth int) error {
	want := localityScopes[:max(depth, 1)]
	if len(s.scopes) < len(want) || !slices.Equal(s.scopes[:len(want)], want) {
		return invalid("service %q: distribute patterns name %s, so the scopes must start with %v (they are %v)",
			s.name, strings.Join(want, "/"), want, s.scopes)
	}
	return nil
}

// distributeMetaSize is the metadata bytes of the rules: per rule its from,
// a target count byte, and per target its pattern and a weight byte.
func (s *builtService) distributeMetaSize() int {
	n := 0
	for _, r := range s.distribute {
		n += 2 + len(r.from) + 1
		for _, t := range r.targets {
			n += 2 + len(t.pattern) + 1
		}
	}
	return n
}

func (s *builtService) appendDistribute(b []byte) []byte {
	for _, r := range s.distribute {
		b = append(appendStr(b, r.from), byte(len(r.targets)))
		for _, t := range r.targets {
			b = append(appendStr(b, t.pattern), byte(t.weight))
		}
	}
	return b
}

// prefix is a distribute pattern as the lookup uses it: the labels of its
// fixed segments, which name one node at depth n of each tree.
type prefix struct {
	n      int
	labels [len(localityScopes)]uint64
}

func prefixOf(segs []string) prefix {
	p := prefix{n: len(segs)}
	for i, s := range segs {
		p.labels[i] = Label(s)
	}
	return p
}

// matches says whether a source, given as its labels per scope, has the
// prefix (Istio's LocalityMatch of the proxy's locality against a from).
func (p *prefix) matches(labels []uint64) bool {
	for i := range p.n {
		want := emptyLabel
		if i < len(labels) {
			want = labels[i]
		}
		if want != p.labels[i] {
			return false
		}
	}
	return true
}

// distRule is a decoded distribute rule.
type distRule struct {
	from    prefix
	targets []distTarget
}

type distTarget struct {
	prefix
	pattern string
	weight  uint32
}

// readDistribute reads the distribute rules into rules (sized by the
// policy record's count).
func (m *metaReader) readDistribute(rules []DistributeSpec) {
	for i := range rules {
		rules[i].From = m.str()
		k := int(m.byte1())
		rules[i].To = make(map[string]uint32, k)
		for range k {
			p := m.str()
			if _, dup := rules[i].To[p]; dup && m.err == nil {
				m.err = corrupt("distribute rule %d repeats to %q", i+1, p)
			}
			rules[i].To[p] = uint32(m.byte1())
		}
	}
}

// byte1 reads one byte.
func (m *metaReader) byte1() byte {
	if m.err != nil {
		return 0
	}
	if len(m.b) < 1 {
		m.err = corrupt("metadata ends inside a distribute rule")
		return 0
	}
	c := m.b[0]
	m.b = m.b[1:]
	return c
}

// indexDistribute checks the decoded rules as Build does and hashes their
// patterns.
func (s *Service) indexDistribute() error {
	if len(s.distribute) == 0 {
		return nil
	}
	b := builtService{name: s.name, scopes: s.scopes, spill: s.overprovision != 0}
	if err := b.parseDistribute(s.distribute, len(s.failover)); err != nil {
		return corrupt("%s", strings.TrimPrefix(err.Error(), ErrInvalidTopology.Error()+": "))
	}
	s.dist = make([]distRule, len(b.distribute))
	for i, r := range b.distribute {
		from, _ := parsePattern(r.from)
		s.dist[i].from = prefixOf(from)
		for _, t := range r.targets {
			segs, _ := parsePattern(t.pattern)
			s.dist[i].targets = append(s.dist[i].targets, distTarget{prefix: prefixOf(segs), pattern: t.pattern, weight: t.weight})
		}
	}
	return nil
}

// Target is one to locality of the distribute rule that applies to a
// source: its pattern and weight, and its endpoints.
type Target struct {
	Pattern string
	Weight  uint32 // percent of the rule
	Counts  PriorityCounts
}

// targetState is a target's endpoints in each set (one span each: a
// pattern is one node of each tree) and its effective weights.
type targetState struct {
	span       [numSets]Span
	node       uint32 // its node in the eligible tree (the root when it has none)
	effH, effD uint64 // the sums of its localities' effective weights (fixed point)
}

// everywhere is the rule of a source no from matches: Istio then leaves
// every locality its endpoints and its weight.
var everywhere = distRule{targets: []distTarget{{pattern: "*", weight: 100}}}

// ruleFor is the index of the first distribute rule whose from matches the
// source (Istio's applyLocalityWeights), or len(s.dist) for none.
func (s *Service) ruleFor(labels []uint64) int {
	for k := range s.dist {
		if s.dist[k].from.matches(labels) {
			return k
		}
	}
	return len(s.dist)
}

// precomputeDistribute computes, once per tree, the loads of a source each
// rule applies to (and of one no rule applies to): they do not depend on
// the source beyond which rule applies, so a source's loads are a copy.
// The service's trees must be checked (Decode) or placed (Builder) first.
func (s *Service) precomputeDistribute() {
	if len(s.dist) == 0 {
		s.distLoads = nil
		return
	}
	s.distLoads = make([]Loads, len(s.dist)+1)
	for k := range s.distLoads {
		n := len(everywhere.targets)
		if k < len(s.dist) {
			n = len(s.dist[k].targets)
		}
		l := &s.distLoads[k]
		l.priorities = priorities{tree: s.tree}
		l.Targets, l.dist = make([]Target, n), make([]targetState, n)
		l.applyDistribute(s, k)
		l.distribute(s.overprovision, s.panicThreshold)
	}
}

// copyDistribute makes l the precomputed loads d of a distribute rule,
// copying only what a reader of a distribute priority reads: its one
// priority and the rule; the targets are shared, read-only.
func (l *Loads) copyDistribute(d *Loads) {
	l.tree, l.N, l.panic = d.tree, d.N, d.panic
	l.Rank[0], l.Failover[0], l.Group[0], l.Counts[0], l.Healthy[0], l.Degraded[0] = 0, 0, 0, d.Counts[0], d.Healthy[0], d.Degraded[0]
	l.Rule, l.NTargets, l.Targets, l.dist, l.effSum = d.Rule, d.NTargets, d.Targets, d.dist, d.effSum
}

// applyDistribute makes the one priority of a service with distribute
// rules for rule k (len(s.dist): no rule's from matches): its targets'
// ranges in each tree and their counts. Their effective weights are their
// localities' (weighTargets, once the localities are known).
func (l *Loads) applyDistribute(s *Service, k int) {
	rule := &everywhere
	if k < len(s.dist) {
		rule, l.Rule = &s.dist[k], k+1
	}
	roots := [numSets]uint32{s.lay.Root, s.lay.AuxRoot[0], s.lay.AuxRoot[1]}
	var sum PriorityCounts
	for i := range rule.targets {
		t, st := &rule.targets[i], &l.dist[i]
		*st = targetState{node: s.lay.Root}
		for set := range numSets {
			if set != setEligible && s.auxEmpty(set-1) {
				continue // an empty set: nothing to walk
			}
			n, ok := s.findNode(set, roots[set], &t.prefix)
			if set == setEligible {
				st.node = n
			}
			if ok {
				rec := s.nodesOf(set)[int(n)*wire.NodeRecordSize:][:wire.NodeRecordSize]
				st.span[set] = Span{le.Uint32(rec[wire.NLo:]), le.Uint32(rec[wire.NHi:])}
			}
		}
		h, d := uint32(st.span[setEligible].Len()), uint32(st.span[setDegraded].Len())
		c := PriorityCounts{Healthy: h, Degraded: d, Total: h + d + uint32(st.span[setUnhealthy].Len())}
		l.Targets[i] = Target{Pattern: t.pattern, Weight: t.weight, Counts: c}
		sum.Healthy, sum.Degraded, sum.Total = sum.Healthy+h, sum.Degraded+d, sum.Total+c.Total
	}
	l.NTargets = len(rule.targets)
	if sum.Total > 0 {
		l.N, l.Counts[0] = 1, sum
	}
}

// fixedOne is 1 in the fixed point of the effective weights.
const fixedOne = 1 << 20

// findNode walks a tree from root along a prefix; ok is false when a
// segment has no child (no endpoint of the set matches the prefix).
func (s *Service) findNode(set int, root uint32, p *prefix) (uint32, bool) {
	n := root
	for i := range p.n {
		c, ok := s.child(set, n, p.labels[i])
		if !ok {
			return root, false
		}
		n = c
	}
	return n, true
}

// targetOf is the target whose endpoints (in any set) hold ep, as a
// priority: 0, or -1 when none does.
func (l *Loads) targetOf(ep uint32) int {
	for i := range l.NTargets {
		for _, sp := range l.dist[i].span {
			if ep >= sp.Lo && ep < sp.Hi {
				return 0
			}
		}
	}
	return -1
}

// TargetShare is the part of the source's traffic (0..1) that target i
// gets: the healthy load spread over the targets by their healthy
// effective weights, the degraded load by their degraded ones (Envoy's
// locality schedulers); in panic, the load spread by endpoint count (as the
// random policy spreads over all the priority's endpoints).
func (l *Loads) TargetShare(i int) float64 {
	if i < 0 || i >= l.NTargets || l.N == 0 {
		return 0
	}
	h, d := float64(l.Healthy[0]), float64(l.Degraded[0])
	if l.InPanic(0) {
		return (h + d) / 100 * float64(l.Targets[i].Counts.Total) / float64(l.Counts[0].Total)
	}
	if h+d == 0 {
		h = 100 // choosePriority's fallback: P0's healthy endpoints
	}
	return h/100*l.effShare(i, false) + d/100*l.effShare(i, true)
}

// effShare is target i's part of one availability's effective weights.
func (l *Loads) effShare(i int, degraded bool) float64 {
	sum := l.effSum[0]
	if degraded {
		sum = l.effSum[1]
	}
	if sum == 0 {
		return 0
	}
	return float64(l.eff(i, degraded)) / float64(sum)
}

func (l *Loads) eff(i int, degraded bool) uint64 {
	if degraded {
		return l.dist[i].effD
	}
	return l.dist[i].effH
}

// TargetRange is the eligible endpoints of the target whose endpoints (in
// any set) hold ep, as a range; ok is false when no target does. A data
// plane takes retry fallbacks from it, so that they stay in the rule's
// targets.
func (l *Loads) TargetRange(ep uint32) (r Range, ok bool) {
	for i := range l.NTargets {
		for _, sp := range l.dist[i].span {
			if ep >= sp.Lo && ep < sp.Hi {
				e := l.dist[i].span[setEligible]
				return Range{Lo: e.Lo, Hi: e.Hi}, true
			}
		}
	}
	return Range{}, false
}

// auxEmpty says whether aux tree k (degraded, unhealthy) has no endpoint.
func (s *Service) auxEmpty(k int) bool {
	lo, hi := s.auxRange(k)
	return lo == hi
}

// TargetSpans are target i's endpoints in each set (eligible, degraded,
// unhealthy) as endpoint record ranges; empty spans for a target without
// endpoints in a set or for i out of range.
func (l *Loads) TargetSpans(i int) [numSets]Span {
	if i < 0 || i >= l.NTargets {
		return [numSets]Span{}
	}
	return l.dist[i].span
}

// TargetWeights are target i's effective weights for the healthy and the
// degraded availability, in the fixed point of 2^20 = 1 (docs/FORMAT.md
// "Distribute", step 3); 0 for i out of range.
func (l *Loads) TargetWeights(i int) (healthy, degraded uint64) {
	if i < 0 || i >= l.NTargets {
		return 0, 0
	}
	return l.dist[i].effH, l.dist[i].effD
}

// DistributeFrom is the labels of the fixed segments of rule k's from
// pattern (none for `*`), as a source's first labels must be for the rule
// to apply; nil for k out of range.
func (s *Service) DistributeFrom(k int) []uint64 {
	if k < 0 || k >= len(s.dist) {
		return nil
	}
	return s.dist[k].from.labels[:s.dist[k].from.n]
}

// RuleLoads is the loads of every source distribute rule k applies to
// (k = len(Distribute): of a source no rule applies to), read-only; nil
// without distribute rules or for k out of range.
func (s *Service) RuleLoads(k int) *Loads {
	if k < 0 || k >= len(s.distLoads) {
		return nil
	}
	return &s.distLoads[k]
}
