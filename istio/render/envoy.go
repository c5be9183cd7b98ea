package render

import (
	"fmt"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/common/v3"
	overridehostv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/override_host/v3"
	roundrobinv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/round_robin/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
)

// OverrideHostCluster is the Cluster fragment the EnvoyFilter merges into a
// managed service's outbound cluster: Envoy's OverrideHost load-balancing
// policy reading OverrideHostHeader, falling back to locality-weighted round
// robin.
//
// It also replaces common_lb_config's locality setting, which istiod sets to
// locality_weighted_lb_config for a Service with trafficDistribution (and
// for failover, failoverPriority or distribute): istiod clears that field
// itself whenever it sets a load_balancing_policy, as "not compatible" with
// it (istio/istio pilot/pkg/networking/core/cluster_builder.go:211-216). A
// MERGE patch cannot delete a field, but it can set the other member of the
// same oneof, which clears it: zone_aware_lb_config with routing 0%, the
// value istiod emits to switch Envoy's zone-aware routing off
// (pilot/pkg/networking/core/loadbalancer/loadbalancer.go:213-220). The
// locality weighting of the fallback lives in the RoundRobin policy's own
// locality_lb_config.
func OverrideHostCluster() (*clusterv3.Cluster, error) {
	rr, err := anypb.New(&roundrobinv3.RoundRobin{LocalityLbConfig: &commonv3.LocalityLbConfig{
		LocalityConfigSpecifier: &commonv3.LocalityLbConfig_LocalityWeightedLbConfig_{
			LocalityWeightedLbConfig: &commonv3.LocalityLbConfig_LocalityWeightedLbConfig{},
		},
	}})
	if err != nil {
		return nil, fmt.Errorf("round robin config: %w", err)
	}
	oh, err := anypb.New(&overridehostv3.OverrideHost{
		OverrideHostSources: []*overridehostv3.OverrideHost_OverrideHostSource{{Header: OverrideHostHeader}},
		FallbackPolicy:      policy("envoy.load_balancing_policies.round_robin", rr),
	})
	if err != nil {
		return nil, fmt.Errorf("override host config: %w", err)
	}
	return &clusterv3.Cluster{
		LoadBalancingPolicy: policy("envoy.load_balancing_policies.override_host", oh),
		CommonLbConfig: &clusterv3.Cluster_CommonLbConfig{
			LocalityConfigSpecifier: &clusterv3.Cluster_CommonLbConfig_ZoneAwareLbConfig_{
				ZoneAwareLbConfig: &clusterv3.Cluster_CommonLbConfig_ZoneAwareLbConfig{RoutingEnabled: &typev3.Percent{Value: 0}},
			},
		},
	}, nil
}

func policy(name string, conf *anypb.Any) *clusterv3.LoadBalancingPolicy {
	return &clusterv3.LoadBalancingPolicy{Policies: []*clusterv3.LoadBalancingPolicy_Policy{{
		TypedExtensionConfig: &corev3.TypedExtensionConfig{Name: name, TypedConfig: conf},
	}}}
}

// overrideHostPatch is OverrideHostCluster as the Struct an EnvoyFilter patch carries.
func overrideHostPatch() (*structpb.Struct, error) {
	c, err := OverrideHostCluster()
	if err != nil {
		return nil, err
	}
	return toStruct(c)
}

func toStruct(m proto.Message) (*structpb.Struct, error) {
	js, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", m.ProtoReflect().Descriptor().FullName(), err)
	}
	var s structpb.Struct
	if err := protojson.Unmarshal(js, &s); err != nil {
		return nil, fmt.Errorf("envoy patch as struct: %w", err)
	}
	return &s, nil
}
