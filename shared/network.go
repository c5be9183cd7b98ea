package shared

import (
	"cmp"
	"slices"

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
	case s.spill:
		return "does not combine with spillover (its priorities rank network like any other scope; Istio's failoverPriority network rule, istio/istio b6787c12, is not implemented yet)"
	}
	return ""
}

// sortNetwork fills s.netOrder: the eligible endpoints sorted as the
// eligible set is, but by the scopes after network.
func (s *builtService) sortNetwork() {
	if !s.netRule {
		return
	}
	L := len(s.scopes)
	s.netOrder = slices.Clone(s.order[:s.nElig])
	slices.SortFunc(s.netOrder, func(a, b int32) int {
		if c := slices.Compare(s.labels[int(a)*L+1:int(a+1)*L], s.labels[int(b)*L+1:int(b+1)*L]); c != 0 {
			return c
		}
		return s.eps[a].compareAddr(&s.eps[b])
	})
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
// the service's endpoints: a copy of each eligible one.
func (s *Service) netCopies() uint32 {
	if s.networkRule {
		return s.lay.EpEligible
	}
	return 0
}

// decodeNetworkRule reads the network rule from a policy record; nAux is
// the number of aux nodes of the tree.
func (s *Service) decodeNetworkRule(p []byte, nAux uint64) error {
	rule, count := p[wire.PNetworkRule], le.Uint32(p[wire.PNetworkCount:])
	s.networkRule = rule == 1 // s.lay holds the network tree's place (wire.ServiceLayout)
	switch {
	case rule > 1, (rule == 1) != (count > 0):
		return corrupt("network rule %d with a network tree of %d nodes", rule, count)
	case uint64(s.lay.NetRoot)+uint64(count) > nAux:
		return corrupt("network tree at %d (+%d) outside %d aux nodes", s.lay.NetRoot, count, nAux)
	}
	return nil
}

// checkNetworkRule checks that a service with the network rule is one Build
// gives it to (network first, more scopes, mode failover, no bound, no
// priority load).
func (s *Service) checkNetworkRule() error {
	if s.networkRule && (s.scopes[0] != "network" || len(s.scopes) < 2 || s.mode != ModeFailover || s.minRank != 0 || s.overprovision != 0) {
		return corrupt("network rule with scopes %v, mode %s, min_rank %d, overprovisioning factor %d", s.scopes, s.mode, s.minRank, s.overprovision)
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
	var elig, copies uint64
	for k := range s.lay.EpEligible {
		elig += recordHash(t.eps[int(s.lay.EpFirst+k)*wire.EndpointRecordSize:][:wire.EndpointRecordSize])
		copies += recordHash(t.eps[int(s.lay.EpFirst+s.lay.EpTotal+k)*wire.EndpointRecordSize:][:wire.EndpointRecordSize])
	}
	if elig != copies {
		return corrupt("the network rule's endpoint copies are not the eligible endpoints")
	}
	return nil
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
