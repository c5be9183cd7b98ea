package shared

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/loctree/loctree/shared/wire"
)

// Network rules of a service whose first scope is "network" (docs/FORMAT.md,
// "Network rule"; ServiceSpec.NetworkRule).
const (
	NetworkRuleZtunnel = "ztunnel"
	NetworkRulePlain   = "plain"
)

// parseNetworkRule decides whether the network rule is in force: by default
// wherever it can change a candidate set, explicitly only there.
func (s *builtService) parseNetworkRule(spec *ServiceSpec) error {
	if err := s.decideNetworkRule(spec); err != nil {
		return err
	}
	s.decideOther()
	return s.checkFailoverScopes()
}

// The network_rule byte of a spillover service with copies by its first
// scope (docs/FORMAT.md, "Network rule with a priority load" and "Copies
// by the first scope").
const (
	// otherRanked: the endpoints of the other networks are ranked by every
	// scope after network (Istio's failoverPriority network rule, "ignore
	// network": the match goes on over the labels after it).
	otherRanked = 2
	// otherMerged: the endpoints of the other values of the first scope
	// are one priority (failoverPriority = the scopes, no failover rules:
	// Istio's priority len − 0 for a first label that differs), drawn by
	// locality across the values.
	otherMerged = 3
	// otherLocality: they are ranked by region, zone and subzone only
	// (failover rules: failoverPriority rank × 5 + LbPriority, the rank
	// being the same for all of them, and LbPriority blind to the scopes
	// after subzone).
	otherLocality = 4
	// withClasses is added to the byte of a service with two or more
	// scopes before its first locality scope: its copies hold a group per
	// class before the locality (groups.go), 5 to 7 (format version 8).
	withClasses = 3
)

// decideOther decides whether a spillover service ranks the endpoints of
// other values of its first scope from copies of them sorted by the scopes
// after it (sortOther): under the network rule, and wherever the first
// scope is not a locality scope and a locality scope follows. Istio
// ranks them per value of the first scope (applyFailoverPriorityPerLocality
// at b6787c12) and istiod groups them into localities by region, zone and
// subzone alone (endpoint_builder.go), so one priority of other values is
// one tree across the values, as the network rule's is. With two or more
// scopes before the first locality scope, every class of endpoints that
// differ first at one of them has its group of copies (groups.go). Not
// with failover_limit (candidates share the first scope) or distribute
// (region first).
func (s *builtService) decideOther() {
	switch {
	case !s.spill || s.mode != ModeFailover || s.minRank > 0 || len(s.distribute) > 0 || len(s.scopes) < 2:
		return
	case s.netRule:
		s.other = otherRanked
	case !isLocalityScope(s.scopes[0]) && firstLocality(s.scopes) < len(s.scopes):
		s.other = otherMerged
		if len(s.failover) > 0 {
			s.other = otherLocality
		}
	default:
		return
	}
	s.first = firstLocality(s.scopes)
	s.groups = otherGroups(1, s.other == otherRanked)
	if s.first < 2 || s.first == len(s.scopes) {
		return
	}
	if g := otherGroups(s.first, s.other == otherRanked); len(g) <= maxGroups {
		s.groups, s.classes = g, true
	}
}

// isLocalityScope says whether a scope is one of Envoy's locality fields.
func isLocalityScope(sc string) bool { return slices.Contains(localityScopes[:], sc) }

func (s *builtService) decideNetworkRule(spec *ServiceSpec) error {
	switch spec.NetworkRule {
	case NetworkRulePlain:
		return nil
	case "":
		s.netRule = s.networkRuleApplies() == ""
		return nil
	case NetworkRuleZtunnel:
		if why := s.networkRuleApplies(); why != "" {
			return invalid("service %q: network_rule ztunnel %s; remove network_rule or set it to plain", s.name, why)
		}
		s.netRule = true
		return nil
	}
	return invalid("service %q: network_rule %q (want %q or %q)", s.name, spec.NetworkRule, NetworkRuleZtunnel, NetworkRulePlain)
}

// networkRuleApplies says why the network rule cannot apply, or "".
func (s *builtService) networkRuleApplies() string {
	switch {
	case s.scopes[0] != "network":
		return "needs network as the first scope"
	case len(s.scopes) < 2:
		return "needs a scope after network to rank the other networks by"
	case s.mode != ModeFailover:
		return "has no effect in mode strict (candidates match every scope)"
	case s.minRank > 0:
		return "has no effect with failover_limit (candidates share the network)"
	}
	return ""
}

// checkFailoverScopes refuses failover rules where Istio's priorities,
// failoverPriority rank × 5 + LbPriority (applyLocalityFailover over
// applyFailoverPriorities, istio/istio loadbalancer.go at b6787c12, line
// 212), are not nested ranges of the trees: more scopes before region than
// the groups of copies by class hold (groups.go: each rank of the scopes
// before region is split again by region, zone and subzone), unless a
// failover_limit keeps every candidate on the source's values of them; or
// zone and subzone not right after region in that order (LbPriority ranks
// by them wherever they are).
func (s *builtService) checkFailoverScopes() error {
	if len(s.failover) == 0 {
		return nil
	}
	at := slices.Index(s.scopes, "region")
	if at > 1 && s.minRank < at && !s.classes || at == 1 && s.other == 0 && s.minRank < 1 && !isLocalityScope(s.scopes[0]) {
		return invalid("service %q: failover with scopes %v: Istio ranks every rank of the %d scopes before region again by region, zone and subzone (rank × 5 + LbPriority), which the copies hold for up to %d scopes before region (%d under the network rule); put at most that many before region, or set failover_limit: %s", s.name, s.scopes, at, MaxScopesBeforeRegion(false), MaxScopesBeforeRegion(true), s.scopes[at-1])
	}
	next := at + 1
	for _, name := range []string{"zone", "subzone"} {
		i := slices.IndexFunc(s.scopes, func(sc string) bool { k, _, _ := strings.Cut(sc, "="); return k == name })
		if i < 0 {
			continue
		}
		if i != next {
			return invalid("service %q: failover with scopes %v: Istio's LbPriority ranks region, then zone, then subzone (applyLocalityFailover), so %s must follow %s directly", s.name, s.scopes, s.scopes[i], s.scopes[next-1])
		}
		next++
	}
	return nil
}

// otherNetwork is the network of a spillover service's other-network trees
// that stands for every network none of a set's endpoints is on (a source
// there ranks them all): the label of a value no scope value can have
// (control characters are refused), so no endpoint's network shares it.
const otherNetworkValue = "\x00"

var otherNetwork = Label(otherNetworkValue)

// OtherNetworkLabel is the label of the other-network trees' copies for a
// network no endpoint is on (bpf/lib/loads.h LT_OTHER_NETWORK).
func OtherNetworkLabel() uint64 { return otherNetwork }

// sortNetwork fills s.netOrder: the eligible endpoints sorted as the
// eligible set is, but by the scopes after network; with spillover, the
// other-network copies (sortOther).
func (s *builtService) sortNetwork() error {
	if s.other != 0 {
		return s.sortOther()
	}
	if !s.netRule {
		return nil
	}
	L := len(s.scopes)
	s.netOrder = slices.Clone(s.order[:s.nElig])
	slices.SortFunc(s.netOrder, func(a, b int32) int {
		if c := slices.Compare(s.labels[int(a)*L+1:int(a+1)*L], s.labels[int(b)*L+1:int(b+1)*L]); c != 0 {
			return c
		}
		return s.eps[a].compareAddr(&s.eps[b])
	})
	return nil
}

// sortOther fills s.netOrder, s.netLabel, s.netSet and s.netChain with
// the copies of a spillover service under the network rule (docs/FORMAT.md,
// "Network rule"), or by another first scope ("Copies by the first
// scope"), one group after another (groups.go; below, the first scope's
// values are the networks): per set (eligible, degraded, unhealthy) and
// per key of each group, in key order, the set's endpoints of the key's
// class sorted by the scopes from the group's chain on. For the network
// rule's ranked copies and the other values of the first scope, the key
// is a network m (otherNetwork among them) and the class the endpoints
// not on m: a source on network m ranks the other networks' endpoints of
// a set by that copy, Istio's failoverPriority network rule (istio/istio
// b6787c12). Every set has a copy for every key whose class has an
// endpoint in the set, so that a locality of a key's copies is the same
// label path in every set: Envoy weighs it by its endpoints in all three.
func (s *builtService) sortOther() error {
	L := len(s.scopes)
	bounds := [numSets + 1]int{0, s.nElig, s.nElig + s.nDeg, len(s.order)}
	type keyed struct {
		key   uint64
		chain uint8
		in    func(i int32) bool
	}
	var keys []keyed
	s.classKeys = map[uint64]string{}
	for _, g := range s.groups {
		chain := g.chain(s.first)
		for _, c := range s.classesOf(g) {
			if c.id != "" {
				if prev, ok := s.classKeys[c.key]; ok && prev != c.id {
					return fmt.Errorf("%w: service %q: two classes of endpoints before the locality share label %#x", ErrLabelCollision, s.name, c.key)
				}
				s.classKeys[c.key] = c.id
			}
			keys = append(keys, keyed{c.key, uint8(chain), c.in})
		}
	}
	slices.SortFunc(keys, func(a, b keyed) int { return cmp.Compare(a.key, b.key) })
	for set := range numSets {
		part := s.order[bounds[set]:bounds[set+1]]
		if len(part) == 0 {
			continue
		}
		sorted := map[uint8][]int32{}
		for _, k := range keys {
			byChain, ok := sorted[k.chain]
			if !ok {
				byChain = slices.Clone(part)
				from := int(k.chain)
				slices.SortFunc(byChain, func(a, b int32) int {
					if c := slices.Compare(s.labels[int(a)*L+from:int(a+1)*L], s.labels[int(b)*L+from:int(b+1)*L]); c != 0 {
						return c
					}
					return s.eps[a].compareAddr(&s.eps[b])
				})
				sorted[k.chain] = byChain
			}
			for _, i := range byChain {
				if k.in(i) {
					s.netOrder, s.netLabel, s.netSet = append(s.netOrder, i), append(s.netLabel, k.key), append(s.netSet, uint8(set))
					s.netChain = append(s.netChain, k.chain)
				}
			}
		}
	}
	if len(s.netOrder) > maxCopies {
		return invalid("service %q: %d copies of endpoints to rank them by the scopes before the locality (at most %d): the scopes %v have too many values", s.name, len(s.netOrder), maxCopies, s.scopes[:s.first])
	}
	return nil
}

// maxCopies bounds a service's copies by the scopes before its locality:
// each endpoint is copied once per value of those scopes it does not have.
const maxCopies = 1 << 22

// class is one key of a group and the endpoints of its class.
type class struct {
	key uint64
	id  string // the class, for telling two classes of one key apart
	in  func(i int32) bool
}

// classesOf lists a group's keys, one per value a source can have at the
// class's scopes: every tuple of values the service's endpoints (of any
// set) have there, and for the last scope otherNetwork, the value no
// endpoint of the prefix has (its class is the whole prefix). Groups
// without a prefix (the first scope's other values, the ranked copies) are
// keyed by the value itself.
func (s *builtService) classesOf(g otherGroup) []class {
	L := len(s.scopes)
	lab := func(i int32, d int) uint64 { return s.labels[int(i)*L+d] }
	nets := []uint64{otherNetwork}
	for i := range s.eps {
		nets = append(nets, lab(int32(i), 0))
	}
	slices.Sort(nets)
	nets = slices.Compact(nets)
	if g.d == 0 {
		out := make([]class, 0, len(nets))
		for _, m := range nets {
			out = append(out, class{key: m, in: func(i int32) bool { return lab(i, 0) != m }})
		}
		return out
	}
	// The prefixes: scopes [0, d) on the source's values, or with net,
	// scope 0 on any other network than m and [1, d) the source's.
	var out []class
	from := 0
	if g.net {
		from = 1
	}
	onPrefix := func(i int32, m uint64, p []uint64) bool {
		if g.net && lab(i, 0) == m {
			return false
		}
		for j, v := range p {
			if lab(i, from+j) != v {
				return false
			}
		}
		return true
	}
	ms := []uint64{0}
	if g.net {
		ms = nets
	}
	for _, m := range ms {
		seen := map[string]bool{}
		for i := range s.eps {
			if !onPrefix(int32(i), m, nil) {
				continue
			}
			row := s.labels[i*L+from : i*L+g.d+1] // the prefix and the class's value
			tuple := slices.Clone(row)
			for _, x := range []uint64{tuple[len(tuple)-1], otherNetwork} {
				t := append(slices.Clone(tuple[:len(tuple)-1]), x)
				id := fmt.Sprint(t)
				if seen[id] {
					continue
				}
				seen[id] = true
				values := t
				if g.net {
					values = append([]uint64{m}, t...)
				}
				p := t[:len(t)-1]
				out = append(out, class{key: classKey(g.d, g.net, values), id: fmt.Sprint(g, values), in: func(i int32) bool {
					return onPrefix(i, m, p) && lab(i, g.d) != x
				}})
			}
		}
	}
	return out
}

// layoutOther lays out the other-network trees of a spillover service as
// one tree over the copies: a root, a child per set (labelled set + 1),
// below it a child per key (a network m, or a class, groups.go) repeated
// down the levels of its chain, then the scopes after the chain. The walk
// finds a set's copies for the source's key in two probes and goes on as
// in the service's own trees.
func (s *builtService) layoutOther(labels map[uint64]string) ([]builtNode, error) {
	if prev, ok := labels[otherNetwork]; ok && prev != otherNetworkValue {
		return nil, fmt.Errorf("%w: service %q: value %q shares label %#x with the network rule's other networks; rename it", ErrLabelCollision, s.name, prev, otherNetwork)
	}
	labels[otherNetwork] = otherNetworkValue
	for k := range s.classKeys {
		if prev, ok := labels[k]; ok && prev != classValue {
			return nil, fmt.Errorf("%w: service %q: value %q shares label %#x with a class of endpoints before the locality; rename it", ErrLabelCollision, s.name, prev, k)
		}
		labels[k] = classValue
	}
	base := uint32(len(s.eps))
	L := len(s.scopes)
	labelOf := func(k uint32, depth int) uint64 {
		c := int(k - base)
		switch {
		case depth == 0:
			return uint64(s.netSet[c]) + 1
		case depth <= int(s.netChain[c]):
			return s.netLabel[c]
		}
		return s.labels[int(s.netOrder[c])*L+depth-1]
	}
	nodes := []builtNode{{lo: base, hi: base + uint32(len(s.netOrder))}}
	levelStart, levelEnd := 0, 1
	for depth := 0; depth <= L; depth++ {
		for n := levelStart; n < levelEnd; n++ {
			splitBy(&nodes, n, func(k uint32) uint64 { return labelOf(k, depth) })
		}
		levelStart, levelEnd = levelEnd, len(nodes)
	}
	return nodes, nil
}

// classValue is what the labels map holds for a class key (groups.go).
const classValue = "\x00class"

// splitBy appends the children of node n, one per run of equal labels.
func splitBy(nodes *[]builtNode, n int, label func(k uint32) uint64) {
	lo, hi := (*nodes)[n].lo, (*nodes)[n].hi
	first := uint32(len(*nodes))
	for i := lo; i < hi; {
		j, l := i+1, label(i)
		for j < hi && label(j) == l {
			j++
		}
		*nodes = append(*nodes, builtNode{label: l, lo: i, hi: j})
		i = j
	}
	(*nodes)[n].firstChild = first
	(*nodes)[n].childCount = uint32(len(*nodes)) - first
}

// compareAddr orders endpoints by address bytes, address length and port,
// as the sort key of the eligible set does.
func (e *builtEndpoint) compareAddr(o *builtEndpoint) int {
	return cmp.Or(cmp.Compare(e.hi, o.hi), cmp.Compare(e.lo, o.lo),
		cmp.Compare(e.addr.Addr().BitLen(), o.addr.Addr().BitLen()), cmp.Compare(e.addr.Port(), o.addr.Port()))
}

// lookupNetwork answers a source whose network has no eligible endpoint:
// the deepest match of labels[1:] in the network tree (over copies of the
// eligible endpoints sorted by the scopes after network).
func (s *Service) lookupNetwork(labels []uint64) Range {
	if len(labels) > 0 {
		labels = labels[1:]
	}
	r := walk(s.tree.aux, s.lay.NetRoot, labels, len(s.scopes)-1)
	r.Node += uint32(s.tree.NumNodes())
	return r
}

// CrossNetwork reports whether r, a lookup's answer for s, comes from the
// network rule: the source's network has no eligible endpoint, the
// candidates are copies of other networks' endpoints, and r.Depth counts
// the scopes after network they share with the source. (Range.Node is then
// past the tree's nodes: the network tree's aux node, offset by NumNodes.)
func (s *Service) CrossNetwork(r Range) bool {
	return s.networkRule && r.Node >= uint32(s.tree.NumNodes())
}

// netCopies is the number of endpoint records the network rule adds after
// the service's endpoints: a copy of each eligible one, or with spillover
// the other-network copies of every set.
func (s *Service) netCopies() uint32 {
	switch {
	case s.networkRule:
		return s.lay.EpEligible
	case s.netOther:
		return s.otherCopies
	}
	return 0
}

// decodeNetworkRule reads the network rule from a policy record; nAux is
// the number of aux nodes of the tree.
func (s *Service) decodeNetworkRule(t *Tree, p []byte, nAux uint64) error {
	rule, count := p[wire.PNetworkRule], le.Uint32(p[wire.PNetworkCount:])
	s.classes = rule > otherLocality
	if s.classes {
		rule -= withClasses
	}
	s.networkRule, s.netOther = rule == 1, rule >= otherRanked // s.lay holds the network tree's place (wire.ServiceLayout)
	if s.netOther {
		s.otherRule = rule
	}
	switch {
	case rule > otherLocality, (rule != 0) != (count > 0), s.classes && !s.netOther:
		return corrupt("network rule %d with a network tree of %d nodes", p[wire.PNetworkRule], count)
	case rule == otherMerged && p[wire.PFailoverCount] != 0, rule == otherLocality && p[wire.PFailoverCount] == 0:
		return corrupt("network rule %d with %d failover rules (3 has none, 4 some)", rule, p[wire.PFailoverCount])
	case uint64(s.lay.NetRoot)+uint64(count) > nAux:
		return corrupt("network tree at %d (+%d) outside %d aux nodes", s.lay.NetRoot, count, nAux)
	}
	if s.netOther {
		root := t.AuxNode(s.lay.NetRoot)
		if root.Lo != s.lay.EpFirst+s.lay.EpTotal || root.Hi < root.Lo {
			return corrupt("other-network copies [%d, %d) do not follow the service's endpoints (%d)", root.Lo, root.Hi, s.lay.EpFirst+s.lay.EpTotal)
		}
		s.otherCopies = root.Hi - root.Lo
	}
	return nil
}

// checkNetworkRule checks that a service with the network rule is one Build
// gives it to (network first, more scopes, mode failover, no bound; without
// a priority load, or with one and no distribute rules), and sets its
// groups of copies.
func (s *Service) checkNetworkRule() error {
	if !s.networkRule && !s.netOther {
		return nil
	}
	// the network rule has network first; copies by another first scope
	// one that is no locality scope
	first := s.scopes[0] == "network"
	if s.otherRule > otherRanked {
		first = !isLocalityScope(s.scopes[0])
	}
	if !first || len(s.scopes) < 2 || s.mode != ModeFailover || s.minRank != 0 || (s.overprovision != 0) != s.netOther || len(s.distribute) > 0 {
		return corrupt("network rule with scopes %v, mode %s, min_rank %d, overprovisioning factor %d", s.scopes, s.mode, s.minRank, s.overprovision)
	}
	s.first = firstLocality(s.scopes)
	s.groups = otherGroups(1, s.otherRule == otherRanked)
	if s.classes {
		s.groups = otherGroups(s.first, s.otherRule == otherRanked)
		if s.first < 2 || s.first == len(s.scopes) || len(s.groups) > maxGroups {
			return corrupt("classes before the locality with scopes %v", s.scopes)
		}
	}
	return nil
}

// checkNetworkCopies checks that the network rule's endpoint records are
// the eligible endpoints, in some order: the same multiset of records but
// for the cumulative weight (by a sum of record hashes, O(endpoints)).
func (t *Tree) checkNetworkCopies(s *Service) error {
	if !s.networkRule {
		return nil
	}
	elig := t.hashSpan(Span{s.lay.EpFirst, s.lay.EpFirst + s.lay.EpEligible})
	if elig != t.hashSpan(Span{s.lay.EpFirst + s.lay.EpTotal, s.lay.EpFirst + s.lay.EpTotal + s.lay.EpEligible}) {
		return corrupt("the network rule's endpoint copies are not the eligible endpoints")
	}
	return nil
}

// hashSpan sums the record hashes of a span of endpoints.
func (t *Tree) hashSpan(sp Span) uint64 {
	var h uint64
	for k := sp.Lo; k < sp.Hi; k++ {
		h += recordHash(t.eps[int(k)*wire.EndpointRecordSize:][:wire.EndpointRecordSize])
	}
	return h
}

// checkOtherCopies checks the other-network copies of a spillover service
// (their tree is checked): per set, a child for otherNetwork and for every
// network of the service's endpoints that not all the set's endpoints are
// on, each over the same multiset of records as the set without that
// network's endpoints. O(networks × endpoints), as the copies are. With
// classes (groups.go) the children are the networks' copies and the
// classes', whose keys are hashes: those are checked by their tree and
// their bounds only.
func (t *Tree) checkOtherCopies(s *Service) error {
	nets := map[uint64]bool{}
	for set := range numSets {
		own := s.setRoot(set)
		for k := own.FirstChild; k < own.FirstChild+own.ChildCount; k++ {
			nets[nodeAt(s.nodesOf(set), k).Label] = true
		}
	}
	root := t.AuxNode(s.lay.NetRoot)
	for k := root.FirstChild; k < root.FirstChild+root.ChildCount; k++ {
		d := t.AuxNode(k)
		if d.Label < 1 || d.Label > numSets {
			return corrupt("other-network tree: child %d has set label %d", k, d.Label)
		}
		set := int(d.Label - 1)
		own := s.setRoot(set)
		sum, want := t.hashSpan(Span{own.Lo, own.Hi}), uint32(len(nets)+1)
		if own.ChildCount == 1 {
			want-- // all on one network: nothing to copy for it
		}
		if d.ChildCount != want && !s.classes {
			return corrupt("other-network tree: %d networks for the %s endpoints, want %d", d.ChildCount, setNames[set], want)
		}
		for c := d.FirstChild; c < d.FirstChild+d.ChildCount; c++ {
			m, w := t.AuxNode(c), sum
			if m.Label != otherNetwork && !nets[m.Label] {
				if s.classes {
					continue // a class's copies
				}
				return corrupt("other-network tree: a network %#x no endpoint is on", m.Label)
			}
			if n, ok := s.setChild(set, own, m.Label); ok {
				w -= t.hashSpan(Span{n.Lo, n.Hi})
			}
			if t.hashSpan(Span{m.Lo, m.Hi}) != w {
				return corrupt("other-network copies of the %s endpoints for network %#x are not the endpoints of the other networks", setNames[set], m.Label)
			}
		}
	}
	return nil
}

var setNames = [numSets]string{"eligible", "degraded", "unhealthy"}

// setRoot is the root node of one set's own tree.
func (s *Service) setRoot(set int) Node {
	if set == setEligible {
		return s.tree.Node(s.lay.Root)
	}
	return s.tree.AuxNode(s.lay.AuxRoot[set-1])
}

// setChild finds the child labelled label of n in one set's own tree by
// scanning its children (decode time: the child index is not built yet).
func (s *Service) setChild(set int, n Node, label uint64) (Node, bool) {
	for k := n.FirstChild; k < n.FirstChild+n.ChildCount; k++ {
		c := nodeAt(s.nodesOf(set), k)
		if c.Label == label {
			return c, true
		}
	}
	return Node{}, false
}

// recordHash hashes an endpoint record but its cumulative weight.
func recordHash(b []byte) uint64 {
	w := uint64(le.Uint32(b[wire.EWeight:])) | uint64(b[wire.EFlags])<<32
	return mix64(addrRecordHash(b) ^ mix64(w))
}

// originalOf is the eligible endpoint a network rule's copy i copies (the
// one with its address), or i. It is for tools: O(endpoints).
func (s *Service) originalOf(i uint32) uint32 {
	want := s.tree.Endpoint(i).Addr
	for k := s.lay.EpFirst; k < s.lay.EpFirst+s.lay.EpEligible; k++ {
		if s.tree.Endpoint(k).Addr == want {
			return k
		}
	}
	return i
}

// walkOther walks each set's trees of each group of copies for the source
// (network.go sortOther, groups.go): for the network rule's ranked copies
// and the other values of the first scope, the copies of the set's
// endpoints that are not on the source's network, ranked by the scopes
// after network (or, with classes, after the chain); for a class, those
// that share the scopes before the class's and differ at it. A source on a
// network none of the service's endpoints is on walks otherNetwork's copies
// (all of them); a source whose value at a class's scope none of the
// endpoints of its prefix has, the class's copies for otherNetwork (the
// whole prefix). A set whose copies for the key are empty has none. The
// ranges nest as walk's do, depth 1 being all the group's endpoints for
// the key.
func (l *Loads) walkOther(s *Service, labels []uint64, levels int) {
	root := s.lay.NetRoot
	for gi, g := range s.groups {
		key := l.groupKey(s, gi, labels)
		var want [MaxLevels]uint64
		copy(want[:], labels)
		for j := range min(g.chain(s.first), MaxLevels) {
			want[j] = key
		}
		stop := min(s.groupStop(g), levels)
		for set := range numSets {
			t := numSets*(1+gi) + set
			d, ok := s.child(t, root, uint64(set)+1)
			if ok {
				_, ok = s.child(t, d, key)
			}
			if !ok { // none: empty ranges at the set's copies (or the root's), as the kernel's walk leaves them
				n, at := s.tree.AuxNode(root), root
				if d, found := s.child(t, root, uint64(set)+1); found {
					n, at = s.tree.AuxNode(d), d
				}
				for j := range levels + 2 {
					l.path[t][j], l.node[t][j] = Span{n.Lo, n.Lo}, at
				}
				l.reach[t] = -1
				continue
			}
			l.walk(s, t, d, want[:len(labels)], stop)
			for j := stop + 2; j <= levels+1; j++ { // below the stop: empty ranges, as below a mismatch
				l.path[t][j], l.node[t][j] = l.path[t][stop+1], l.node[t][stop+1]
			}
		}
	}
}

// groupKey is the key of the source's copies in group gi (classesOf): a
// value of the first scope, or the class's hash over the source's values
// before the class's scope and at it, each otherNetwork when none of the
// endpoints of the prefix has the source's value (known from the walks of
// the sets' own trees, or, for a class on the other networks, of the
// ranked copies, which come before it).
func (l *Loads) groupKey(s *Service, gi int, labels []uint64) uint64 {
	src := func(d int) uint64 {
		if d < len(labels) {
			return labels[d]
		}
		return emptyLabel
	}
	reached := func(base, depth int) bool {
		for set := range numSets {
			if l.reach[base+set] >= depth {
				return true
			}
		}
		return false
	}
	has := func(base, d int) uint64 { // the source's value at d, if an endpoint of the prefix has it
		if reached(base, d+1) {
			return src(d)
		}
		return otherNetwork
	}
	g := s.groups[gi]
	if g.d == 0 {
		return has(0, 0)
	}
	var values [MaxLevels + 1]uint64
	n := 0
	if g.net {
		values[0], n = has(0, 0), 1
	}
	for d := n; d < g.d; d++ {
		values[n], n = src(d), n+1
	}
	base := 0
	if g.net {
		base = numSets * s.first // the ranked copies: group first − 1, after the classes on the source's network (otherGroups)
	}
	values[n], n = has(base, g.d), n+1
	return classKey(g.d, g.net, values[:n])
}

// groupStop is how deep a source walks a group's trees (from the set node
// at depth 0): the ranked copies to every scope; a class or the other
// values of the first scope to the locality depth with failover rules
// (LbPriority ranks them) and to 1 without (one priority).
func (s *Service) groupStop(g otherGroup) int {
	switch {
	case g.ranked:
		return MaxLevels + 1
	case len(s.failover) > 0:
		return localityDepth(s.scopes)
	}
	return 1
}

// OtherWalkDepth is how deep a source walks each set's other-value tree
// (its set node at depth 0) of a service with NetworkPriorities: 1 when
// the other values of the first scope are one priority, the locality depth
// when they are ranked by region, zone and subzone only, else MaxLevels+1
// (every scope: the network rule). The ranks below it are one.
func (s *Service) OtherWalkDepth() int {
	return s.groupStop(otherGroup{ranked: s.otherRule == otherRanked})
}
