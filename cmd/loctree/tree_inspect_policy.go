package main

import (
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"

	"github.com/loctree/loctree/shared"
)

// What inspect shows of a service besides its tree: Envoy's priority load
// (spillover), Istio's failover rules and failoverPriority, the failover
// limit, and the state of each endpoint (healthy, degraded, unhealthy).

// Endpoint states as inspect names them. Under allow_all the tree tells
// a healthy endpoint from one that is not, but not degraded from
// unhealthy (both have flags 0, docs/FORMAT.md): inspect of an encoded
// tree then says stateNotHealthy; of a topology, the endpoint's own.
const (
	stateHealthy    = "healthy"
	stateDegraded   = "degraded"
	stateUnhealthy  = "unhealthy"
	stateNotHealthy = "degraded or unhealthy"
)

// jsonSpillover is a service's priority-load settings, in percent.
type jsonSpillover struct {
	OverprovisioningFactor uint32 `json:"overprovisioning_factor"`
	PanicThreshold         uint32 `json:"panic_threshold"`
}

// jsonLoadAware is a load-aware service's band per eligible endpoint of a
// candidate node: requests in flight (the filter) or open connections (the
// kernel).
type jsonLoadAware struct {
	High uint32 `json:"high"`
	Low  uint32 `json:"low"`
}

// jsonPolicy is the part of jsonService inspect adds for the policy.
type jsonPolicy struct {
	Spillover *jsonSpillover        `json:"spillover,omitempty"`
	Failover  []shared.FailoverSpec `json:"failover,omitempty"`
	// FailoverPriority are the scopes of a spillover service whose scopes
	// are not the default: Istio's failoverPriority labels, its priorities.
	FailoverPriority []string `json:"failover_priority,omitempty"`
	FailoverLimit    string   `json:"failover_limit,omitempty"`
	// LoadAware is the band of a load-aware service.
	LoadAware *jsonLoadAware `json:"load_aware,omitempty"`
	// EndpointStates is every endpoint's state, by address.
	EndpointStates map[string]string `json:"endpoint_states"`
}

func policyJSON(s *shared.Service, states []string) jsonPolicy {
	p := jsonPolicy{Failover: s.Failover(), FailoverPriority: failoverPriority(s), FailoverLimit: failoverLimit(s),
		EndpointStates: map[string]string{}}
	if s.OverprovisioningFactor() != 0 {
		p.Spillover = &jsonSpillover{OverprovisioningFactor: s.OverprovisioningFactor(), PanicThreshold: s.PanicThreshold()}
	}
	if high, low, ok := s.LoadAware(); ok {
		p.LoadAware = &jsonLoadAware{High: high, Low: low}
	}
	for i, st := range states {
		p.EndpointStates[s.Tree().Endpoint(s.FirstEndpoint()+uint32(i)).Addr.String()] = st
	}
	return p
}

// failoverPriority is the scopes of a spillover service that are not the
// default ones, nil otherwise.
func failoverPriority(s *shared.Service) []string {
	if s.OverprovisioningFactor() == 0 || slices.Equal(s.Scopes(), shared.DefaultScopes()) {
		return nil
	}
	return s.Scopes()
}

// failoverLimit is the scope failover stops at, "" when unbounded.
func failoverLimit(s *shared.Service) string {
	if s.MinRank() == 0 {
		return ""
	}
	return s.Scope(s.MinRank() - 1)
}

// affinityTimeout is the session affinity of a consistent_hash service
// (the default when it sets none) and whether it is the default; 0 for
// another policy.
func affinityTimeout(s *shared.Service) (uint32, bool) {
	switch {
	case s.AffinityTimeout() != 0:
		return s.AffinityTimeout(), false
	case s.Policy() == shared.PolicyConsistentHash:
		return shared.DefaultAffinityTimeout, true
	}
	return 0, false
}

// drawPolicy prints a line per setting the service has.
func drawPolicy(w io.Writer, s *shared.Service) {
	if s.OverprovisioningFactor() != 0 {
		fmt.Fprintf(w, "  spillover: overprovisioning factor %d%% (%s), panic threshold %d%%\n",
			s.OverprovisioningFactor(), factor(s.OverprovisioningFactor()), s.PanicThreshold())
	}
	for _, r := range s.Failover() {
		fmt.Fprintf(w, "  failover: %s -> %s\n", safe(r.From), safe(r.To))
	}
	if p := failoverPriority(s); p != nil {
		fmt.Fprintf(w, "  failover priority: %s (Istio failoverPriority)\n", joinSafe(p, ", "))
	}
	if l := failoverLimit(s); l != "" {
		fmt.Fprintf(w, "  failover limit: %s (candidates share the source's %s)\n", safe(l), safe(l))
	}
	if high, low, ok := s.LoadAware(); ok {
		fmt.Fprintf(w, "  load aware: widen above %d, narrow below %d per eligible endpoint: requests in flight (the filter, each proxy worker's own count), open connections (the kernel, each node's own count)\n", high, low)
	}
}

// factor is a percent as Envoy's factor: 140 is "1.4".
func factor(percent uint32) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%d.%02d", percent/100, percent%100), "0"), ".")
}

// endpointStates are the states of s's endpoints, in record order
// [EpFirst, +EpTotal). top, when inspect read a topology, tells degraded
// from unhealthy under allow_all.
func endpointStates(s *shared.Service, top *shared.Topology) []string {
	out := make([]string, s.EndpointCount())
	var specs map[netip.AddrPort]string
	for i := range out {
		out[i] = recordState(s, uint32(i))
		if out[i] == stateNotHealthy {
			if specs == nil {
				specs = specStates(top, s.Name())
			}
			if st, ok := specs[s.Tree().Endpoint(s.FirstEndpoint()+uint32(i)).Addr]; ok {
				out[i] = st
			}
		}
	}
	return out
}

// recordState is the state the tree gives endpoint i of s (relative to
// EpFirst): under only_healthy its set (eligible, degraded, unhealthy);
// under allow_all its healthy flag.
func recordState(s *shared.Service, i uint32) string {
	switch {
	case s.Health() == shared.HealthAllowAll && s.Tree().Endpoint(s.FirstEndpoint()+i).Healthy:
		return stateHealthy
	case s.Health() == shared.HealthAllowAll:
		return stateNotHealthy
	case i < s.EligibleCount():
		return stateHealthy
	case i < s.EligibleCount()+s.DegradedCount():
		return stateDegraded
	}
	return stateUnhealthy
}

// specStates are the states of the endpoints of the service named name in
// top, by address as the tree holds it; nil without a topology.
func specStates(top *shared.Topology, name string) map[netip.AddrPort]string {
	if top == nil {
		return nil
	}
	out := map[netip.AddrPort]string{}
	for i := range top.Services {
		if top.Services[i].Name != name {
			continue
		}
		for _, e := range top.Services[i].Endpoints {
			ap, err := netip.ParseAddrPort(e.Address)
			if err != nil {
				continue
			}
			out[netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())] = specState(e)
		}
	}
	return out
}

func specState(e shared.EndpointSpec) string {
	switch {
	case e.Healthy != nil && !*e.Healthy:
		return stateUnhealthy
	case e.Degraded:
		return stateDegraded
	}
	return stateHealthy
}

// withState is an endpoint's address, followed by its state unless it is
// healthy: "127.0.0.2:80 (degraded)".
func withState(addr netip.AddrPort, state string) string {
	if state == stateHealthy {
		return addr.String()
	}
	return fmt.Sprintf("%s (%s)", addr, state)
}
