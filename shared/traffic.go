package shared

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
// computed once per tree and service (O(endpoints)); its methods do not
// allocate.
type Destinations struct {
	level  int      // the scope's index in the service's scopes; -1: not one of them
	first  uint32   // absolute index of values[0]
	values []string // per endpoint from first: eligible, degraded, unhealthy, then network-rule copies
	weight map[string]uint64
	total  uint64
}

// Destinations indexes s's endpoints by their value at scope.
func (s *Service) Destinations(scope string) *Destinations {
	d := &Destinations{level: -1, first: s.lay.EpFirst}
	for i, sc := range s.scopes {
		if sc == scope {
			d.level = i
		}
	}
	n := s.lay.EpTotal + s.netCopies()
	d.values = make([]string, n)
	for i := range d.values {
		d.values[i] = UnknownValue
	}
	if d.level < 0 {
		return d
	}
	byLabel := s.eligibleValues(d)
	s.otherValues(d, byLabel)
	d.weigh(s)
	return d
}

// eligibleValues fills the eligible endpoints' values and returns them by
// label, for the endpoints whose trees keep labels only.
func (s *Service) eligibleValues(d *Destinations) map[uint64]string {
	byLabel := map[uint64]string{}
	var path [MaxLevels]uint32
	for i := s.lay.EpFirst; i < s.lay.EpFirst+s.lay.EpEligible; i++ {
		if s.nodePath(setEligible, i, &path) <= d.level {
			continue
		}
		v := s.NodeValue(path[d.level])
		d.values[i-d.first] = v
		byLabel[Label(v)] = v
	}
	return byLabel
}

// otherValues fills the degraded and unhealthy endpoints' values (from
// their aux trees' labels) and the network-rule copies' (their originals').
func (s *Service) otherValues(d *Destinations, byLabel map[uint64]string) {
	var path [MaxLevels]uint32
	for set := setDegraded; set <= setUnhealthy; set++ {
		lo, hi := s.auxRange(set - 1)
		for i := lo; i < hi; i++ {
			if s.nodePath(set, i, &path) <= d.level {
				continue
			}
			if v, ok := byLabel[nodeAt(s.nodesOf(set), path[d.level]).Label]; ok {
				d.values[i-d.first] = v
			}
		}
	}
	original := map[string]string{}
	for i := s.lay.EpFirst; i < s.lay.EpFirst+s.lay.EpEligible; i++ {
		original[s.tree.Endpoint(i).Addr.String()] = d.values[i-d.first]
	}
	for i := s.lay.EpFirst + s.lay.EpTotal; i < s.lay.EpFirst+s.lay.EpTotal+s.netCopies(); i++ {
		if v, ok := original[s.tree.Endpoint(i).Addr.String()]; ok {
			d.values[i-d.first] = v
		}
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
	d.weight = map[string]uint64{}
	byWeight := s.policy != PolicyRandom && s.policy != PolicyLeastConnections
	if byWeight {
		byWeight = false
		for i := s.lay.EpFirst; i < s.lay.EpFirst+s.lay.EpEligible; i++ {
			byWeight = byWeight || s.tree.Endpoint(i).Weight > 0
		}
	}
	for i := s.lay.EpFirst; i < s.lay.EpFirst+s.lay.EpEligible; i++ {
		w := uint64(1)
		if byWeight {
			w = uint64(s.tree.Endpoint(i).Weight)
		}
		d.weight[d.values[i-d.first]] += w
		d.total += w
	}
}

// Len is the number of endpoints Value knows from the service's first:
// its endpoints, then its network-rule copies.
func (d *Destinations) Len() int { return len(d.values) }

// Known says the scope is one of the service's, so picks have a value.
func (d *Destinations) Known() bool { return d.level >= 0 }

// Level is the scope's index in the service's scopes, or -1.
func (d *Destinations) Level() int { return d.level }

// Value is endpoint i's value at the scope (i an absolute endpoint index,
// as a pick returns), or UnknownValue.
func (d *Destinations) Value(i uint32) string {
	if i-d.first >= uint32(len(d.values)) {
		return UnknownValue
	}
	return d.values[i-d.first]
}

// NoLocalityCross is the share of picks over all the service's eligible
// endpoints, weighed by its policy, whose value at the scope is not src:
// what a source with that value would send elsewhere with locality load
// balancing off. ok is false when there is nothing to pick or the scope
// is not the service's.
func (d *Destinations) NoLocalityCross(src string) (share float64, ok bool) {
	if d.level < 0 || d.total == 0 {
		return 0, false
	}
	return float64(d.total-d.weight[src]) / float64(d.total), true
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
