package istio

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	meshconfig "istio.io/api/mesh/v1alpha1"
	"sigs.k8s.io/yaml"

	"github.com/loctree/loctree/host"
	"github.com/loctree/loctree/internal/testing/wasmtest"
	"github.com/loctree/loctree/istio/render"
)

// istioInclusionPrefixes are the stats an Istio proxy always creates
// (whatever proxyStatsMatcher adds): istio/istio pkg/bootstrap/config.go:64
// (requiredEnvoyStatsMatcherInclusionPrefixes, appended to any configured
// list by parseOption) and tools/packaging/common/envoy_bootstrap.json:
// 159-193 (reporter=, component, istio). Envoy matches them against a
// stat's full name, for a plugin's metric wasmcustom.<defined>
// (source/extensions/common/wasm/context.cc, Context::defineMetric).
var istioInclusionPrefixes = []string{"reporter=", "cluster_manager", "listener_manager", "server", "cluster.xds-grpc", "wasm", "component", "istio"}

// shippedStatTags reads istio/mesh/istiod-values.yaml into Istio's own
// MeshConfig type (an unknown field is an error) and returns its
// defaultConfig.extraStatTags.
func shippedStatTags(t *testing.T) []string {
	t.Helper()
	data, err := Files.ReadFile("mesh/istiod-values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	var values struct{ MeshConfig json.RawMessage }
	if err := json.Unmarshal(js, &values); err != nil {
		t.Fatal(err)
	}
	var mc meshconfig.MeshConfig
	if err := protojson.Unmarshal(values.MeshConfig, &mc); err != nil {
		t.Fatalf("mesh/istiod-values.yaml meshConfig: %v", err)
	}
	return mc.GetDefaultConfig().GetExtraStatTags()
}

// TestMeshStatTagsLabelFilterMetrics: with the extraStatTags that
// istio/mesh/istiod-values.yaml sets, an Istio proxy exports the real
// filter's per-service picks as one Prometheus metric labelled by service
// and level, every filter metric under a loctree_ name with no tag left in
// it, and creates them all under Istio's default stats inclusion. Without
// the tags the service stays in the name (why the install sets them).
func TestMeshStatTagsLabelFilterMetrics(t *testing.T) {
	tags := shippedStatTags(t)
	if !reflect.DeepEqual(tags, []string{"loctree_service", "loctree_level", "loctree_traffic_source", "loctree_traffic_destination"}) {
		t.Fatalf("extraStatTags %v", tags)
	}
	module := wasmtest.Bytes(t, "../filter")
	srv := treeServer(t)
	conf, err := protojson.Marshal(shippedPlugin(t).Spec.PluginConfig)
	if err != nil {
		t.Fatal(err)
	}
	picks := func(tags []host.StatTag) host.Metric {
		h, vm := filterVM(t, module, conf, srv.URL, tags)
		reviewsRequest(t, h, vm, render.OverrideHostHeader)
		if err := vm.Tick(); err != nil {
			t.Fatal(err)
		}
		var found host.Metric
		for _, m := range h.Metrics().Snapshot() {
			if !strings.HasPrefix(m.Prometheus, "loctree_") || strings.Contains(m.Prometheus, "=.=") {
				t.Errorf("%q is exported as %q", m.Name, m.Prometheus)
			}
			if !included("wasmcustom." + m.Name) {
				t.Errorf("%q: Istio creates no such stat by default", m.Name)
			}
			if strings.HasSuffix(m.Name, "loctree_service_picks_total") {
				found = m
			}
		}
		return found
	}
	m := picks(host.IstioStatTags(tags...))
	want := []host.Tag{{Name: "loctree_level", Value: "2"}, {Name: "loctree_service", Value: "reviews.default.svc.cluster.local"}}
	if m.Prometheus != "loctree_service_picks_total" || !reflect.DeepEqual(m.Tags, want) || m.Value != 1 {
		t.Errorf("picks exported as %s%v = %d, want loctree_service_picks_total%v = 1", m.Prometheus, m.Tags, m.Value, want)
	}
	if m := picksWithout(t, module, conf, srv.URL); !strings.Contains(m.Prometheus, "reviews") {
		t.Errorf("without extraStatTags: %q, expected the service in the name", m.Prometheus)
	}
}

// picksWithout is the per-service picks metric of a proxy without the
// extraStatTags.
func picksWithout(t *testing.T, module, conf []byte, agentURL string) host.Metric {
	t.Helper()
	h, vm := filterVM(t, module, conf, agentURL, host.IstioStatTags())
	reviewsRequest(t, h, vm, render.OverrideHostHeader)
	if err := vm.Tick(); err != nil {
		t.Fatal(err)
	}
	for _, m := range h.Metrics().Snapshot() {
		if strings.HasSuffix(m.Name, "loctree_service_picks_total") {
			return m
		}
	}
	t.Fatal("no per-service picks metric")
	return host.Metric{}
}

func included(stat string) bool {
	for _, p := range istioInclusionPrefixes {
		if strings.HasPrefix(stat, p) {
			return true
		}
	}
	return false
}
