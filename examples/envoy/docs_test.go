package envoy_test

import (
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	overridehost "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/override_host/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"gopkg.in/yaml.v3"

	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/round_robin/v3"
)

// yamlBlocks returns the ```yaml blocks of docs/WASM.md that parse as a
// single YAML document with the given kind.
func yamlBlocks(t *testing.T, kind string) []map[string]any {
	t.Helper()
	doc, err := os.ReadFile("../../docs/WASM.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, m := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllSubmatch(doc, -1) {
		var v map[string]any
		if yaml.Unmarshal(m[1], &v) == nil && v["kind"] == kind {
			out = append(out, v)
		}
	}
	if len(out) == 0 {
		t.Fatalf("docs/WASM.md has no %s", kind)
	}
	return out
}

func field(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			v = v.(map[string]any)[k]
		case int:
			v = v.([]any)[k]
		}
	}
	return v
}

// TestDocsEnvoyFilterPatch: the cluster patch in docs/WASM.md is a valid
// fragment of Envoy's Cluster (the OverrideHost policy and its fallback
// included), and it is the sidecar patch of istio/examples: the same match
// and the same value.
func TestDocsEnvoyFilterPatch(t *testing.T) {
	example := istioExamplePatch(t, "SIDECAR_OUTBOUND")
	for _, ef := range yamlBlocks(t, "EnvoyFilter") {
		patch := field(ef, "spec", "configPatches", 0).(map[string]any)
		if !reflect.DeepEqual(patch, example) {
			t.Fatalf("docs/WASM.md's EnvoyFilter patch differs from istio/examples':\n%v\n%v", patch, example)
		}
		value := field(patch, "patch", "value").(map[string]any)
		value["name"] = "outbound|9080||reviews.default.svc.cluster.local" // a MERGE patch has no name
		js, _ := json.Marshal(value)
		var c cluster.Cluster
		if err := protojson.Unmarshal(js, &c); err != nil {
			t.Fatalf("patch is not an Envoy Cluster: %v", err)
		}
		if err := c.ValidateAll(); err != nil {
			t.Fatalf("patch fails Envoy's validation: %v", err)
		}
		validatePolicies(t, c.GetLoadBalancingPolicy())
	}
}

// validatePolicies validates every policy packed in an Any, recursing into
// OverrideHost's fallback.
func validatePolicies(t *testing.T, lb *cluster.LoadBalancingPolicy) {
	t.Helper()
	for _, p := range lb.GetPolicies() {
		m, err := p.GetTypedExtensionConfig().GetTypedConfig().UnmarshalNew()
		if err != nil {
			t.Fatalf("policy %s: %v", p.GetTypedExtensionConfig().GetName(), err)
		}
		if v, ok := m.(interface{ ValidateAll() error }); ok {
			if err := v.ValidateAll(); err != nil {
				t.Fatalf("policy %s fails Envoy's validation: %v", p.GetTypedExtensionConfig().GetName(), err)
			}
		}
		if oh, ok := m.(*overridehost.OverrideHost); ok {
			validatePolicies(t, oh.GetFallbackPolicy())
		}
	}
}

// istioExamplePatch is the configPatch of istio/examples' EnvoyFilter for
// the given match context, without the comments YAML drops anyway.
func istioExamplePatch(t *testing.T, context string) map[string]any {
	t.Helper()
	b, err := os.ReadFile("../../istio/examples/override-host-envoyfilter.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var ef map[string]any
	if err := yaml.Unmarshal(b, &ef); err != nil {
		t.Fatal(err)
	}
	for _, p := range field(ef, "spec", "configPatches").([]any) {
		if field(p, "match", "context") == context {
			return p.(map[string]any)
		}
	}
	t.Fatalf("istio/examples' EnvoyFilter has no %s patch", context)
	return nil
}

// TestDocsWasmPluginConfig: every WasmPlugin's pluginConfig in
// docs/WASM.md starts the real filter.
func TestDocsWasmPluginConfig(t *testing.T) {
	for _, wp := range yamlBlocks(t, "WasmPlugin") {
		js, _ := json.Marshal(field(wp, "spec", "pluginConfig"))
		checkPluginConfig(t, string(js), "")
	}
}
