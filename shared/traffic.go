package shared

import (
	"net/netip"
	"slices"
)

// Cross-locality traffic (docs/AGENT.md and docs/WASM.md, "Cross-zone
// traffic"): where the picks of a service land at one scope (the zone by
// default), and the share that would leave the source's value of that scope
// if locality load balancing were off. Both planes count their picks by
// (source value, destination value) with these, so the kernel's and the
// filter's matrices mean the same thing.

// UnknownValue is the destination of a pick whose value at the scope the
// tree does not hold: the scope is not one of the service's, or the
// endpoint is one the tree keeps no value for.
const UnknownValue = "(unknown)"

// Destinations are the values at one scope of a service's endpoints, and
// the weight a pick over all its eligible endpoints gives each value. It is
// computed once per tree and service: O(nodes above the scope + endpoints)
// time, two bytes an endpoint; its methods do not allocate.
type Destinations struct {
	level  int      // the scope's index in the service's scopes; -1: not one of them
	first  uint32   // absolute index of of[0]
	names  []string // the values; names[0] is UnknownValue
	of     []uint16 // per endpoint from first (eligible, degraded, unhealthy, then network-rule copies): index in names
	weight []uint64 // per name: eligible weight, as the policy weighs it
	total  uint64
}

// maxDestinations bounds the distinct values (of is uint16); more are
// UnknownValue.
const maxDestinations = 1 << 16

// Destinations indexes s's endpoints by their value at scope.
func (s *Service) Destinations(scope string) *Destinations {
	d := &Destinations{level: -1, first: s.lay.EpFirst, names: []string{UnknownValue}}
	for i, sc := range s.scopes {
		if sc == scope {
			d.level = i
		}
	}
	d.of = make([]uint16, s.lay.EpTotal+s.netCopies())
	if d.level >= 0 {
		byLabel := map[uint64]uint16{}
		s.fillValues(d, setEligible, s.setRoot(setEligible), 0, byLabel)
		for set := setDegraded; set <= setUnhealthy; set++ {
			s.fillValues(d, set, s.setRoot(set), 0, byLabel)
		}
		s.fillCopies(d)
	}
	d.weigh(s)
	return d
}

// fillValues walks the tree of set down to the scope's level and gives
// each node's endpoints the node's value: from the strings section for the
// eligible tree, by label from the eligible values for the aux trees (whose
// values are not stored).
func (s *Service) fillValues(d *Destinations, set int, n Node, depth int, byLabel map[uint64]uint16) {
	nodes := s.nodesOf(set)
	for k := n.FirstChild; k < n.FirstChild+n.ChildCount; k++ {
		c := nodeAt(nodes, k)
		if depth < d.level {
			s.fillValues(d, set, c, depth+1, byLabel)
			continue
		}
		idx, ok := byLabel[c.Label]
		if !ok && set == setEligible && len(d.names) < maxDestinations {
			idx, ok = uint16(len(d.names)), true
			d.names = append(d.names, s.NodeValue(k))
			byLabel[c.Label] = idx
		}
		if ok && c.Lo >= d.first && c.Hi <= d.first+uint32(len(d.of)) && c.Lo <= c.Hi {
			for i := c.Lo; i < c.Hi; i++ {
				d.of[i-d.first] = idx
			}
		}
	}
}

// fillCopies gives the network rule's copies their originals' values.
func (s *Service) fillCopies(d *Destinations) {
	if s.netCopies() == 0 {
		return
	}
	original := map[netip.AddrPort]uint16{}
	for i := s.lay.EpFirst; i < s.lay.EpFirst+s.lay.EpEligible; i++ {
		original[s.tree.Endpoint(i).Addr] = d.of[i-d.first]
	}
	for i := s.lay.EpFirst + s.lay.EpTotal; i < s.lay.EpFirst+s.lay.EpTotal+s.netCopies(); i++ {
		d.of[i-d.first] = original[s.tree.Endpoint(i).Addr]
	}
}

// nodePath writes the nodes from the root's child down to the leaf whose
// range holds endpoint i in the tree of set, and returns their number.
func (s *Service) nodePath(set int, i uint32, path *[MaxLevels]uint32) int {
	nodes := s.nodesOf(set)
	n := s.setRoot(set)
	depth := 0
	for n.ChildCount > 0 && depth < len(s.scopes) {
		k, found := n.FirstChild, false
		for ; k < n.FirstChild+n.ChildCount; k++ {
			if c := nodeAt(nodes, k); i >= c.Lo && i < c.Hi {
				found = true
				break
			}
		}
		if !found {
			break
		}
		path[depth] = k
		n = nodeAt(nodes, k)
		depth++
	}
	return depth
}

// weigh sums the eligible endpoints' weights per value, as the service's
// policy weighs a pick over all of them: by weight for weighted,
// round_robin, least_request and consistent_hash (uniformly when every
// weight is 0), one each for random and least_connections.
func (d *Destinations) weigh(s *Service) {
	d.weight = make([]uint64, len(d.names))
	byWeight := false
	if s.policy != PolicyRandom && s.policy != PolicyLeastConnections {
		for i := s.lay.EpFirst; i < s.lay.EpFirst+s.lay.EpEligible; i++ {
			byWeight = byWeight || s.tree.Endpoint(i).Weight > 0
		}
	}
	for i := s.lay.EpFirst; i < s.lay.EpFirst+s.lay.EpEligible; i++ {
		w := uint64(1)
		if byWeight {
			w = uint64(s.tree.Endpoint(i).Weight)
		}
		d.weight[d.of[i-d.first]] += w
		d.total += w
	}
}

// Len is the number of endpoints Value knows from the service's first:
// its endpoints, then its network-rule copies.
func (d *Destinations) Len() int { return len(d.of) }

// Names are the values the endpoints have, UnknownValue first (a copy).
func (d *Destinations) Names() []string { return slices.Clone(d.names) }

// Index is the index in Names of endpoint i's value (0, UnknownValue, for
// an index outside the service).
func (d *Destinations) Index(i uint32) int {
	if i-d.first >= uint32(len(d.of)) {
		return 0
	}
	return int(d.of[i-d.first])
}

// Known says the scope is one of the service's, so picks have a value.
func (d *Destinations) Known() bool { return d.level >= 0 }

// Level is the scope's index in the service's scopes, or -1.
func (d *Destinations) Level() int { return d.level }

// Value is endpoint i's value at the scope (i an absolute endpoint index,
// as a pick returns), or UnknownValue.
func (d *Destinations) Value(i uint32) string { return d.names[d.Index(i)] }

// NoLocalityCross is the share of picks over all the service's eligible
// endpoints, weighed by its policy, whose value at the scope is not src:
// what a source with that value would send elsewhere with locality load
// balancing off. ok is false when there is nothing to pick or the scope
// is not the service's.
func (d *Destinations) NoLocalityCross(src string) (share float64, ok bool) {
	if d.level < 0 || d.total == 0 {
		return 0, false
	}
	var in uint64
	if i := slices.Index(d.names[1:], src); i >= 0 {
		in = d.weight[i+1]
	}
	return float64(d.total-in) / float64(d.total), true
}

// SharedScopes is how many leading scopes of s endpoint i shares with the
// source src: its match depth, 0..len(Scopes). An index that is not one
// of s's endpoints shares none.
func (s *Service) SharedScopes(src Locality, i uint32) int {
	set := setEligible
	switch c := s.lay.EpFirst + s.lay.EpTotal; {
	case i >= c && i < c+s.netCopies():
		i = s.originalOf(i)
	case i < s.lay.EpFirst || i >= c:
		return 0
	case i >= s.lay.EpFirst+s.lay.EpEligible+s.lay.EpDegraded:
		set = setUnhealthy
	case i >= s.lay.EpFirst+s.lay.EpEligible:
		set = setDegraded
	}
	var path [MaxLevels]uint32
	n := s.nodePath(set, i, &path)
	for d := range n {
		if nodeAt(s.nodesOf(set), path[d]).Label != Label(src[s.scopes[d]]) {
			return d
		}
	}
	return n
}

// ValueAt is endpoint i's value at scope index level, found by walking
// down its set's tree (O(levels · log children), no allocation, no table):
// what a proxy uses where a table of every endpoint would cost memory.
// A degraded or unhealthy endpoint's value is found by its aux tree's
// label among the eligible tree's values; UnknownValue when no eligible
// endpoint has it, for a network rule's copies, and for an index outside
// the service or a level outside its scopes.
func (s *Service) ValueAt(i uint32, level int) string {
	set := s.setOf(i)
	if level < 0 || level >= len(s.scopes) || set < 0 {
		return UnknownValue
	}
	nodes, n := s.nodesOf(set), s.setRoot(set)
	var k uint32
	for d := 0; d <= level; d++ {
		var ok bool
		if k, ok = childHolding(nodes, n, i); !ok {
			return UnknownValue
		}
		n = nodeAt(nodes, k)
	}
	if set == setEligible {
		return s.NodeValue(k)
	}
	if v, ok := s.valueOfLabel(s.setRoot(setEligible), 0, level, n.Label); ok {
		return v
	}
	return UnknownValue
}

// valueOfLabel finds the value whose label is label among the eligible
// tree's nodes at level below n (O(those nodes): for the degraded and
// unhealthy endpoints a spillover service picks in panic or for its
// degraded share).
func (s *Service) valueOfLabel(n Node, depth, level int, label uint64) (string, bool) {
	for k := n.FirstChild; k < n.FirstChild+n.ChildCount; k++ {
		c := s.tree.Node(k)
		if depth == level && c.Label == label {
			return s.NodeValue(k), true
		}
		if depth < level {
			if v, ok := s.valueOfLabel(c, depth+1, level, label); ok {
				return v, true
			}
		}
	}
	return "", false
}

// setOf is the set whose tree holds endpoint i, or -1 (outside the
// service, or a network rule's copy).
func (s *Service) setOf(i uint32) int {
	switch first := s.lay.EpFirst; {
	case i < first || i >= first+s.lay.EpTotal:
		return -1
	case i < first+s.lay.EpEligible:
		return setEligible
	case i < first+s.lay.EpEligible+s.lay.EpDegraded:
		return setDegraded
	}
	return setUnhealthy
}

// childHolding is the child of n whose range holds endpoint i: children
// sorted by label are sorted by range too (docs/FORMAT.md), so a binary
// search by range start finds it.
func childHolding(nodes []byte, n Node, i uint32) (uint32, bool) {
	lo, hi := n.FirstChild, n.FirstChild+n.ChildCount
	for lo+1 < hi {
		mid := lo + (hi-lo)/2
		if nodeAt(nodes, mid).Lo <= i {
			lo = mid
		} else {
			hi = mid
		}
	}
	if n.ChildCount == 0 {
		return 0, false
	}
	c := nodeAt(nodes, lo)
	return lo, i >= c.Lo && i < c.Hi
}

// NoLocalityCross is Destinations' NoLocalityCross computed from the
// eligible tree's nodes at scope index level and the records' cumulative
// weights, with no table of endpoints: O(nodes above the level).
func (s *Service) NoLocalityCross(level int, src string) (share float64, ok bool) {
	if level < 0 || level >= len(s.scopes) || s.lay.EpEligible == 0 {
		return 0, false
	}
	var in, total [2]uint64 // [0] by count, [1] by weight
	s.sumValues(s.setRoot(setEligible), 0, level, src, &in, &total)
	k := 0
	if s.policy != PolicyRandom && s.policy != PolicyLeastConnections && total[1] > 0 {
		k = 1
	}
	return float64(total[k]-in[k]) / float64(total[k]), true
}

// sumValues adds the count and the weight of the eligible endpoints below
// n at level to total, and to in where the value is src.
func (s *Service) sumValues(n Node, depth, level int, src string, in, total *[2]uint64) {
	for k := n.FirstChild; k < n.FirstChild+n.ChildCount; k++ {
		c := s.tree.Node(k)
		if depth < level {
			s.sumValues(c, depth+1, level, src, in, total)
			continue
		}
		if c.Hi <= c.Lo {
			continue
		}
		first := s.tree.Endpoint(c.Lo)
		w := [2]uint64{uint64(c.Hi - c.Lo), s.tree.Endpoint(c.Hi-1).CumWeight - first.CumWeight + uint64(first.Weight)}
		total[0], total[1] = total[0]+w[0], total[1]+w[1]
		if s.NodeValue(k) == src {
			in[0], in[1] = in[0]+w[0], in[1]+w[1]
		}
	}
}
