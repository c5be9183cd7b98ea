package shared

import (
	"fmt"
	"strings"
)

// Locality maps a scope key (region, zone, subzone, node, cluster, network or
// any label key) to its value. A missing key is the empty value.
type Locality map[string]string

// Topology is the input of Build: services with their endpoints, and optional
// named nodes (a node name → its locality) for tools that pick a source by name.
type Topology struct {
	Services []ServiceSpec `json:"services" yaml:"services"`
	Nodes    []NodeSpec    `json:"nodes,omitempty" yaml:"nodes,omitempty"`
}

// ServiceSpec describes one service. Empty fields take their defaults: scopes
// [region, zone, subzone], mode failover, policy random, health only_healthy.
type ServiceSpec struct {
	Name   string   `json:"name" yaml:"name"`
	Hosts  []string `json:"hosts,omitempty" yaml:"hosts,omitempty"`
	VIP    string   `json:"vip,omitempty" yaml:"vip,omitempty"`
	Scopes []string `json:"scopes,omitempty" yaml:"scopes,omitempty"`
	Mode   string   `json:"mode,omitempty" yaml:"mode,omitempty"`
	Policy string   `json:"policy,omitempty" yaml:"policy,omitempty"`
	Health string   `json:"health,omitempty" yaml:"health,omitempty"`
	// Spillover, when set, replaces the all-or-nothing failover by Envoy's
	// priority load (docs/FORMAT.md, "Priority load"): the priorities are the
	// source's match depths, deepest first. It needs mode failover.
	Spillover *SpilloverSpec `json:"spillover,omitempty" yaml:"spillover,omitempty"`
	// Failover are Istio's localityLbSetting.failover rules: a source in
	// region From whose region has no endpoint prefers region To before
	// any other. They need spillover and a scope named "region".
	Failover []FailoverSpec `json:"failover,omitempty" yaml:"failover,omitempty"`
	// LocalityLB false turns locality load balancing off (Istio's
	// localityLbSetting.enabled: false): every source gets every eligible
	// endpoint. The service then has the single scope NoLocalityScope.
	// Distribute are Istio's localityLbSetting.distribute rules: the first
	// rule whose From matches the source splits its traffic over the To
	// localities by weight. They need spillover, exclude Failover, and
	// need scopes that start with region (, zone, subzone) as deep as
	// their patterns go.
	Distribute []DistributeSpec `json:"distribute,omitempty" yaml:"distribute,omitempty"`
	LocalityLB *bool            `json:"locality_lb,omitempty" yaml:"locality_lb,omitempty"`
	// FailoverLimit bounds failover (issue 11 item 4, "never leave the
	// region"): one of Scopes; candidates must match the source through
	// that scope at least. Beyond it a source has no candidate, as in
	// strict mode: the connect is refused, the filter answers 503. Empty:
	// unbounded.
	FailoverLimit string `json:"failover_limit,omitempty" yaml:"failover_limit,omitempty"`
	// NetworkRule is how a service whose first scope is "network" treats a
	// source whose network has no eligible endpoint (docs/FORMAT.md,
	// "Network rule"): "ztunnel" ranks the other networks' endpoints by the
	// remaining scopes (ztunnel's load_balance since 2d8e90ee); "plain"
	// ends the match at the network, so every eligible endpoint is a
	// candidate. Empty is "ztunnel" for a service that can use it (first
	// scope network, more scopes, mode failover, no failover_limit, no
	// spillover) and "plain" otherwise.
	NetworkRule string `json:"network_rule,omitempty" yaml:"network_rule,omitempty"`
	// SessionAffinity keeps a client on the endpoint it was given for a
	// while, as Kubernetes' sessionAffinity: ClientIP does. It needs policy
	// consistent_hash; the kernel keys it by the client's network namespace.
	SessionAffinity *SessionAffinitySpec `json:"session_affinity,omitempty" yaml:"session_affinity,omitempty"`
	// LoadAware widens a source's candidate node to its parent while the
	// requests in flight per eligible endpoint of the node are above High,
	// and narrows it back only below Low (docs/TOPOLOGY.md, "Load-aware
	// widening"). It needs mode failover without spillover.
	LoadAware *LoadAwareSpec `json:"load_aware,omitempty" yaml:"load_aware,omitempty"`
	Endpoints []EndpointSpec `json:"endpoints" yaml:"endpoints"`
}

// SessionAffinitySpec is Kubernetes' sessionAffinityConfig.clientIP.
type SessionAffinitySpec struct {
	// TimeoutSeconds a client stays on its endpoint after its last
	// connection, 1..86400; empty is Kubernetes' default, 10800.
	TimeoutSeconds *uint32 `json:"timeout_seconds,omitempty" yaml:"timeout_seconds,omitempty"`
}

// Session affinity timeouts of Kubernetes (pkg/apis/core/types.go
// DefaultClientIPServiceAffinitySeconds, MaxClientIPServiceAffinitySeconds).
const (
	DefaultAffinityTimeout = 10800
	MaxAffinityTimeout     = 86400
)

// LoadAwareSpec is the load band of load-aware widening, in requests (or
// connections) in flight per eligible endpoint: an absolute concurrency
// target, not a share of the parent's load. Empty fields take the defaults
// DefaultLoadHigh and DefaultLoadLow; 1 <= Low < High <= MaxLoadBand.
type LoadAwareSpec struct {
	High *uint32 `json:"high,omitempty" yaml:"high,omitempty"`
	Low  *uint32 `json:"low,omitempty" yaml:"low,omitempty"`
}

// The load band's defaults and bound: High 2 is HAZL's default high edge
// (BUOYANT_BALANCER_LOAD_HIGH 2.0); Low 1 is the whole number nearest its
// low edge, 0.8.
const (
	DefaultLoadHigh = 2
	DefaultLoadLow  = 1
	MaxLoadBand     = 65535
)

// FailoverSpec is one failover rule, from-region → to-region.
type FailoverSpec struct {
	From string `json:"from" yaml:"from"`
	To   string `json:"to" yaml:"to"`
}

// DistributeSpec is one distribute rule (Istio's
// LocalityLoadBalancerSetting.Distribute): a source whose locality matches
// From sends To[pattern] percent of its traffic to the endpoints whose
// locality matches pattern, and none to any other endpoint. A pattern is
// "region", "region/zone" or "region/zone/subzone", optionally ending in
// "/*", or "*" alone (Istio's LocalityMatch); the weights are 1..100 and
// sum to 100.
type DistributeSpec struct {
	From string            `json:"from" yaml:"from"`
	To   map[string]uint32 `json:"to" yaml:"to"`
}

// Limits of the distribute rules of a service.
const (
	MaxDistributeRules   = 255
	MaxDistributeTargets = 8
)

// NoLocalityScope is the one scope of a service with locality_lb: false.
// Every endpoint has the empty value for it, and so does every source that
// does not name it, so every lookup matches all eligible endpoints. The key
// is reserved: no service may name it as a scope.
const NoLocalityScope = "loctree.io/no-locality"

// MaxFailover is the largest number of failover rules of a service.
const MaxFailover = 255

// SpilloverSpec are the settings of Envoy's priority load. Empty fields take
// Envoy's defaults: overprovisioning factor 140, panic threshold 50.
type SpilloverSpec struct {
	// OverprovisioningFactor in percent, 1..65535 (Envoy's
	// ClusterLoadAssignment.Policy.overprovisioning_factor).
	OverprovisioningFactor *uint32 `json:"overprovisioning_factor,omitempty" yaml:"overprovisioning_factor,omitempty"`
	// PanicThreshold in percent, 0..100; 0 disables panic (Envoy's
	// CommonLbConfig.healthy_panic_threshold, here a whole percent).
	PanicThreshold *uint32 `json:"panic_threshold,omitempty" yaml:"panic_threshold,omitempty"`
}

// Envoy's defaults (envoy/config/endpoint/v3/endpoint.proto
// overprovisioning_factor; cluster.proto healthy_panic_threshold).
const (
	DefaultOverprovisioningFactor = 140
	DefaultPanicThreshold         = 50
)

// EndpointSpec is one endpoint. Weight defaults to 1 and Healthy to true.
// Degraded marks a healthy endpoint as degraded (Envoy's third health
// state): it takes traffic only as Envoy's degraded load gives it.
type EndpointSpec struct {
	Address  string   `json:"address" yaml:"address"`
	Locality Locality `json:"locality,omitempty" yaml:"locality,omitempty"`
	Weight   *uint32  `json:"weight,omitempty" yaml:"weight,omitempty"`
	Healthy  *bool    `json:"healthy,omitempty" yaml:"healthy,omitempty"`
	Degraded bool     `json:"degraded,omitempty" yaml:"degraded,omitempty"`
}

// NodeSpec names a locality, e.g. a Kubernetes node.
type NodeSpec struct {
	Name     string   `json:"name" yaml:"name"`
	Locality Locality `json:"locality" yaml:"locality"`
}

// DefaultScopes are the routing scopes of a service that names none (a
// new slice each call: a built service's scopes are never shared with a
// caller that could change them).
func DefaultScopes() []string { return []string{"region", "zone", "subzone"} }

// Mode says what a lookup returns when the source matches no endpoint fully.
type Mode uint8

const (
	// ModeFailover returns the eligible endpoints of maximal rank.
	ModeFailover Mode = iota
	// ModeStrict returns only endpoints that match every scope, or none.
	ModeStrict
)

// Policy picks one endpoint inside a candidate range.
type Policy uint8

// The in-group policies.
const (
	PolicyRandom Policy = iota
	PolicyWeighted
	PolicyRoundRobin
	PolicyLeastRequest
	PolicyLeastConnections
	PolicyConsistentHash
)

// Health says which endpoints are eligible.
type Health uint8

const (
	// HealthOnlyHealthy makes only healthy endpoints eligible.
	HealthOnlyHealthy Health = iota
	// HealthAllowAll makes every endpoint eligible.
	HealthAllowAll
)

var (
	modeNames   = []string{"failover", "strict"}
	policyNames = []string{"random", "weighted", "round_robin", "least_request", "least_connections", "consistent_hash"}
	healthNames = []string{"only_healthy", "allow_all"}
)

func (m Mode) String() string   { return enumName(modeNames, int(m)) }
func (p Policy) String() string { return enumName(policyNames, int(p)) }
func (h Health) String() string { return enumName(healthNames, int(h)) }

func enumName(names []string, i int) string {
	if i < len(names) {
		return names[i]
	}
	return fmt.Sprintf("unknown(%d)", i)
}

// ParseMode parses "failover" or "strict"; "" is failover.
func ParseMode(s string) (Mode, error) {
	i, err := parseEnum("mode", modeNames, s)
	return Mode(i), err
}

// ParsePolicy parses a policy name; "" is random.
func ParsePolicy(s string) (Policy, error) {
	i, err := parseEnum("policy", policyNames, s)
	return Policy(i), err
}

// ParseHealth parses "only_healthy" or "allow_all"; "" is only_healthy.
func ParseHealth(s string) (Health, error) {
	i, err := parseEnum("health", healthNames, s)
	return Health(i), err
}

func parseEnum(what string, names []string, s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	for i, n := range names {
		if n == s {
			return i, nil
		}
	}
	return 0, fmt.Errorf("unknown %s %q (want one of %s)", what, s, strings.Join(names, ", "))
}
