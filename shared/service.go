package shared

import (
	"maps"
	"net/netip"
	"slices"
)

// The read-only view of a Service. Slices are copies: a caller cannot
// change what Decode checked under pickers that read it concurrently.

// Index is the service's position in its tree (services sorted by name).
func (s *Service) Index() int { return s.index }

// Name is the service's name, unique in its tree.
func (s *Service) Name() string { return s.name }

// Hosts are the other names a request may use for the service (a copy).
func (s *Service) Hosts() []string { return slices.Clone(s.hosts) }

// Scopes are the service's routing scopes, most significant first (a copy).
func (s *Service) Scopes() []string { return slices.Clone(s.scopes) }

// Mode is failover or strict.
func (s *Service) Mode() Mode { return s.mode }

// Policy is the in-group policy that picks among candidates.
func (s *Service) Policy() Policy { return s.policy }

// Health says which endpoints are eligible.
func (s *Service) Health() Health { return s.health }

// VIP is the service's L4 frontend; invalid when it has none.
func (s *Service) VIP() netip.AddrPort { return s.vip }

// Root is the index of the service's root node (Tree.Node).
func (s *Service) Root() uint32 { return s.lay.Root }

// FirstEndpoint is the index of the service's first endpoint
// (Tree.Endpoint): its eligible endpoints come first, then the degraded
// ones, then the unhealthy ones.
func (s *Service) FirstEndpoint() uint32 { return s.lay.EpFirst }

// EndpointCount is the number of the service's endpoints, of every state.
func (s *Service) EndpointCount() uint32 { return s.lay.EpTotal }

// EligibleCount is the number of its eligible endpoints.
func (s *Service) EligibleCount() uint32 { return s.lay.EpEligible }

// DegradedCount is the number of its degraded endpoints (format version 2).
func (s *Service) DegradedCount() uint32 { return s.lay.EpDegraded }

// OverprovisioningFactor is Envoy's overprovisioning factor in percent;
// non-zero exactly when the service uses the priority load (spillover).
func (s *Service) OverprovisioningFactor() uint32 { return s.overprovision }

// PanicThreshold is the panic threshold in percent (spillover services).
func (s *Service) PanicThreshold() uint32 { return s.panicThreshold }

// Failover are the service's failover rules (a copy).
func (s *Service) Failover() []FailoverSpec { return slices.Clone(s.failover) }

// Distribute are the service's distribute rules (a deep copy).
func (s *Service) Distribute() []DistributeSpec {
	out := slices.Clone(s.distribute)
	for i := range out {
		out[i].To = maps.Clone(out[i].To)
	}
	return out
}

// AffinityTimeout is the session affinity timeout in seconds of a
// consistent_hash service; 0 when it sets none (the kernel then uses
// DefaultAffinityTimeout).
func (s *Service) AffinityTimeout() uint32 { return s.affinityTimeout }

// MinRank bounds failover: candidates and priorities share at least the
// first MinRank scopes with the source; 0 is unbounded.
func (s *Service) MinRank() int { return s.minRank }

// NetworkRule reports whether the service applies ztunnel's network rule
// (format version 4; docs/FORMAT.md, "Network rule").
func (s *Service) NetworkRule() bool { return s.networkRule }

// NetworkPriorities reports whether the service, a spillover service with
// network first (or another scope before its locality scopes), ranks the
// endpoints of the other values of its first scope from copies (Istio's
// failoverPriority network rule, istio/istio b6787c12; docs/FORMAT.md,
// "Copies by the first scope"): its other-network tree follows its
// unhealthy tree in the aux section and NetworkCopies endpoint records
// follow its own (docs/FORMAT.md, "Network rule").
func (s *Service) NetworkPriorities() bool { return s.netOther }

// OtherValuesMerged reports whether a service with NetworkPriorities puts
// the endpoints of the other values of its first scope in one priority
// (network_rule 3: a first scope other than network, no failover rules)
// rather than ranking them by the scopes after it.
func (s *Service) OtherValuesMerged() bool { return s.otherRule == otherMerged }

// NetworkRanked says whether a service with NetworkPriorities applies the
// network rule to them (network first, network_rule ztunnel: the other
// networks ranked by every scope after network), rather than copies by a
// first scope ranked by the locality scopes only.
func (s *Service) NetworkRanked() bool { return s.netOther && s.otherRule == otherRanked }

// ClassesBeforeLocality says whether a service with NetworkPriorities has
// two or more scopes before its first locality scope, each class of
// endpoints that differ from the source first at one of them with its
// own copies (docs/FORMAT.md, "Classes before the locality").
func (s *Service) ClassesBeforeLocality() bool { return s.classes }

// NetworkCopies is the number of endpoint records the network rule adds
// after the service's EndpointCount (0 without it).
func (s *Service) NetworkCopies() uint32 { return s.netCopies() }

// Scope is the service's scope at level i, 0 ≤ i < Levels().
func (s *Service) Scope(i int) string { return s.scopes[i] }
