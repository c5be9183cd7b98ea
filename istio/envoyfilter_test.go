package istio

import (
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/encoding/protojson"
	networkingv1alpha3 "istio.io/client-go/pkg/apis/networking/v1alpha3"

	"github.com/loctree/loctree/internal/manifest"
	"github.com/loctree/loctree/istio/render"
)

// istiodClusters are the outbound clusters istiod generates for a managed
// service, one per way the service can be enabled, as far as the EnvoyFilter
// patch is concerned (istio/istio at 86c9f01fd735, 1.31.0-alpha.0-109):
//
//   - pilot/pkg/networking/core/loadbalancer/loadbalancer.go:139-145
//     (LocalityLBSettings.ApplyToCluster) sets
//     common_lb_config.locality_weighted_lb_config when the effective
//     setting has failover, failoverPriority or distribute, or when
//     ENABLE_LOCALITY_WEIGHTED_LB_CONFIG is on;
//   - loadbalancer.go:265-294 (GetEffectiveLbSetting): a Service with
//     spec.trafficDistribution PreferClose/PreferSameZone/PreferSameNode
//     and no DestinationRule locality setting gets a failoverPriority
//     setting, so locality_weighted_lb_config;
//   - cluster_traffic_policy.go:332-334: such a service also gets
//     healthy_panic_threshold 0 (it must be kept);
//   - loadbalancer.go:213-229 (ZoneAwareLBSettings.ApplyToCluster): a
//     mesh or DestinationRule zoneAwareLbSetting sets zone_aware_lb_config.
//
// cluster_builder.go:211-216 (applyOverrideHostPolicy) is what istiod does
// itself when it sets a load_balancing_policy: it clears
// locality_weighted_lb_config, "not compatible with load_balancing_policy".
func istiodClusters(fqdn string, port uint32) map[string]*clusterv3.Cluster {
	weighted := func(c *clusterv3.Cluster) *clusterv3.Cluster {
		c.CommonLbConfig = &clusterv3.Cluster_CommonLbConfig{
			LocalityConfigSpecifier: &clusterv3.Cluster_CommonLbConfig_LocalityWeightedLbConfig_{
				LocalityWeightedLbConfig: &clusterv3.Cluster_CommonLbConfig_LocalityWeightedLbConfig{},
			},
		}
		return c
	}
	base := func() *clusterv3.Cluster { return manifest.IstioOutboundCluster(fqdn, port) }
	td := weighted(base())
	td.CommonLbConfig.HealthyPanicThreshold = &typev3.Percent{Value: 0}
	zoneAware := base()
	zoneAware.CommonLbConfig = &clusterv3.Cluster_CommonLbConfig{
		LocalityConfigSpecifier: &clusterv3.Cluster_CommonLbConfig_ZoneAwareLbConfig_{
			ZoneAwareLbConfig: &clusterv3.Cluster_CommonLbConfig_ZoneAwareLbConfig{},
		},
	}
	return map[string]*clusterv3.Cluster{
		"annotation only, mesh defaults":                         base(),
		"loctree DestinationRule (localityLbSetting enabled)":    base(),
		"trafficDistribution PreferClose, no DestinationRule":    td,
		"trafficDistribution PreferSameNode, no DestinationRule": td,
		"DestinationRule failoverPriority + outlierDetection":    weighted(base()),
		"DestinationRule distribute":                             weighted(base()),
		"ENABLE_LOCALITY_WEIGHTED_LB_CONFIG=true":                weighted(base()),
		"zoneAwareLbSetting (mesh or DestinationRule)":           zoneAware,
	}
}

// TestEnvoyFilterStripsLocalityWeighted merges every shipped and rendered
// EnvoyFilter CLUSTER patch into each cluster istiod may generate, with the
// oneof semantics of a proto merge (Istio's pkg/proto/merge), and checks that
// no locality_weighted_lb_config is left beside the load_balancing_policy,
// that zone-aware routing is off (the OverrideHost policy routes) and that
// the rest of common_lb_config is kept.
func TestEnvoyFilterStripsLocalityWeighted(t *testing.T) {
	var filters []*networkingv1alpha3.EnvoyFilter
	for _, p := range manifestFiles(t) {
		for _, obj := range decodeFile(t, p) {
			if ef, ok := obj.(*networkingv1alpha3.EnvoyFilter); ok {
				filters = append(filters, ef)
			}
		}
	}
	objs, err := render.Render(render.Options{Service: "ratings.shop", Port: 8080, WasmURL: testWasmURL})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if ef, ok := o.(*networkingv1alpha3.EnvoyFilter); ok {
			filters = append(filters, ef)
		}
	}
	if len(filters) < 2 {
		t.Fatalf("%d EnvoyFilters, want the example and the rendered one", len(filters))
	}
	for _, ef := range filters {
		for _, cp := range ef.Spec.ConfigPatches {
			js, err := protojson.Marshal(cp.Patch.Value)
			if err != nil {
				t.Fatal(err)
			}
			m := cp.Match.GetCluster()
			for name, c := range istiodClusters(m.GetService(), m.GetPortNumber()) {
				panic0 := c.GetCommonLbConfig().GetHealthyPanicThreshold() != nil
				if err := manifest.MergeEnvoy(js, c); err != nil {
					t.Fatalf("%s %s: %v", ef.Name, name, err)
				}
				lb := c.GetCommonLbConfig()
				if lb.GetLocalityWeightedLbConfig() != nil {
					t.Errorf("%s, %s, %s: locality_weighted_lb_config left beside load_balancing_policy", ef.Name, cp.Match.Context, name)
				}
				if za := lb.GetZoneAwareLbConfig(); za == nil || za.GetRoutingEnabled() == nil || za.GetRoutingEnabled().GetValue() != 0 {
					t.Errorf("%s, %s, %s: zone-aware routing not off: %v", ef.Name, cp.Match.Context, name, lb)
				}
				if panic0 && lb.GetHealthyPanicThreshold() == nil {
					t.Errorf("%s, %s: healthy_panic_threshold lost", ef.Name, name)
				}
			}
		}
	}
}
