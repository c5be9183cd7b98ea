package shared

import "slices"

// The groups of copies of a spillover service with copies by its first
// scope (docs/FORMAT.md, "Copies by the first scope" and "Classes before
// the locality"). Istio's failoverPriority priority of an endpoint is
// len − j, j the first of the scopes whose value differs from the
// proxy's (applyFailoverPriorityPerLocality, istio/istio loadbalancer.go
// at b6787c12, lines 306-365); with failover rules it becomes
// priority × 5 + LbPriority (applyLocalityFailover, line 212). Where g
// scopes come before the first locality scope, the endpoints that differ
// from the source first at scope d < g are one such class whatever their
// values after d: one priority without failover rules, ranked by region,
// zone and subzone alone with them, and one set of Envoy localities
// (istiod groups endpoints by region/zone/subzone, endpoint_builder.go).
// The tree over the scopes cannot hold a class as a range for d ≥ 1, nor
// rank it by the locality scopes, so each class has copies, one per
// value the source can have, sorted by the scopes from g on: a group.
// The sets' own trees rank the endpoints that share the g scopes.

// maxGroups bounds a service's groups: 3 classes before the locality
// without the network rule, 2 with it (its ranked copies and a class on
// each side of them).
const maxGroups = 3

// otherGroup is one group of a service's copies.
type otherGroup struct {
	// d is the scope the class differs from the source at first; the
	// scopes before it are the source's values (with net, the first is
	// any other network's).
	d int
	// net: the class is on the other networks (the network rule: Istio's
	// "ignore network" ranks them after every endpoint on the source's).
	net bool
	// ranked: the network rule's copies of the other networks' endpoints
	// ranked by every scope after network (network.go sortOther).
	ranked bool
}

// chain is how many levels of a copy tree carry the group's key: the
// copies are sorted by the scopes from chain on, and their tree keeps the
// depths of the sets' own trees (depth j+1 is scope j) by repeating the
// key on the levels of the scopes the class does not rank by.
func (g otherGroup) chain(first int) int {
	if g.ranked {
		return 1
	}
	return first
}

// otherGroups lists the groups of a service whose first locality scope is
// at index first, in priority order: the classes that differ at d = first−1
// down to 1 on the source's value of the first scope, then those of its
// other values (d = 0 without the network rule; under it, the ranked
// copies and then their classes d = first−1 down to 1).
func otherGroups(first int, ranked bool) []otherGroup {
	var out []otherGroup
	for d := first - 1; d >= 1; d-- {
		out = append(out, otherGroup{d: d})
	}
	if !ranked {
		return append(out, otherGroup{})
	}
	out = append(out, otherGroup{ranked: true})
	for d := first - 1; d >= 1; d-- {
		out = append(out, otherGroup{d: d, net: true})
	}
	return out
}

// FirstLocality is the index of the service's first locality scope
// (region, zone or subzone), or its number of scopes: the scopes before it
// are those whose classes have copies (ClassesBeforeLocality).
func (s *Service) FirstLocality() int { return firstLocality(s.scopes) }

// firstLocality is the index of the first of region, zone and subzone
// among the scopes, or len(scopes).
func firstLocality(scopes []string) int {
	i := slices.IndexFunc(scopes, isLocalityScope)
	if i < 0 {
		return len(scopes)
	}
	return i
}

// classKey is the label of a class's copies under a set node: a hash of
// the class (its depth, whether it is on the other networks) and the
// values that define it, the last the value it differs from (or
// otherNetwork for a value no endpoint has there, as the class copies
// every endpoint of the prefix then). bpf/lib/priority.h lt_class_key
// computes the same.
func classKey(d int, net bool, values []uint64) uint64 {
	h := uint64(d) | 1<<8
	if net {
		h |= 1 << 9
	}
	h = mix64(h ^ classKeySeed)
	for _, v := range values {
		h = mix64(h ^ v)
	}
	return h
}

// classKeySeed keeps class keys apart from any other use of mix64.
const classKeySeed = 0x243f6a8885a308d3

// MaxScopesBeforeRegion is how many scopes a spillover service with
// failover rules may put before region (groups.go: each class of them has
// its copies): 3, or 2 with network first (the network rule's classes
// come twice, on the source's network and on the others).
func MaxScopesBeforeRegion(networkFirst bool) int {
	if networkFirst {
		return (maxGroups + 1) / 2
	}
	return maxGroups
}

// PriorityClass describes priority p of l for tools. For a priority of
// the sets' own trees it is (Rank, -1, false): the scopes the source
// shares with its endpoints. For one of a group of copies (Loads.Other):
// matched counts the scopes its endpoints share with the source, differs
// is the scope they first differ at (0 for the first scope's other
// values and the network rule's other networks), and otherNetworks says
// that they are on other networks than the source's (the network rule).
func (s *Service) PriorityClass(l *Loads, p int) (matched, differs int, otherNetworks bool) {
	if p < 0 || p >= l.N || l.Group[p] == 0 || int(l.Group[p]) > len(s.groups) {
		return int(l.Rank[max(0, min(p, MaxPriorities-1))]), -1, false
	}
	g := s.groups[l.Group[p]-1]
	rank := int(l.Rank[p])
	switch {
	case g.ranked:
		return rank - 1, 0, true // network is not matched, the scopes after it are
	case g.net:
		return g.d - 1 + rank - g.chain(s.first), g.d, true
	}
	return g.d + rank - g.chain(s.first), g.d, false
}

// OneRank says whether priority p of l is a whole class of endpoints (a
// group of copies without failover rules: Istio's one failoverPriority
// rank for them), drawn by locality across its values.
func (s *Service) OneRank(l *Loads, p int) bool {
	if p < 0 || p >= l.N || l.Group[p] == 0 || int(l.Group[p]) > len(s.groups) {
		return false
	}
	return !s.groups[l.Group[p]-1].ranked && len(s.failover) == 0
}

// ClassWalk says what the kernel's service value holds of a service with
// NetworkPriorities (bpf/lib/maps.h lt_service, which derives its groups
// from them and OtherWalkDepth): a class's chain (the index of the first
// locality scope with classes, else 1) and the depth at which a class's
// walk stops.
func (s *Service) ClassWalk() (chain, stop int) {
	if !s.netOther {
		return 0, 0
	}
	chain = 1
	if s.classes {
		chain = s.first
	}
	return chain, s.groupStop(otherGroup{d: 1})
}
