package envoy_test

import (
	"encoding/json"
	"os"
	"regexp"
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"gopkg.in/yaml.v3"

	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/least_request/v3"
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
// fragment of Envoy's Cluster.
func TestDocsEnvoyFilterPatch(t *testing.T) {
	for _, ef := range yamlBlocks(t, "EnvoyFilter") {
		value := field(ef, "spec", "configPatches", 0, "patch", "value").(map[string]any)
		value["name"] = "outbound|9080||reviews.default.svc.cluster.local" // a MERGE patch has no name
		js, _ := json.Marshal(value)
		var c cluster.Cluster
		if err := protojson.Unmarshal(js, &c); err != nil {
			t.Fatalf("patch is not an Envoy Cluster: %v", err)
		}
		if err := c.ValidateAll(); err != nil {
			t.Fatalf("patch fails Envoy's validation: %v", err)
		}
	}
}

// TestDocsWasmPluginConfig: every WasmPlugin's pluginConfig in
// docs/WASM.md starts the real filter.
func TestDocsWasmPluginConfig(t *testing.T) {
	for _, wp := range yamlBlocks(t, "WasmPlugin") {
		js, _ := json.Marshal(field(wp, "spec", "pluginConfig"))
		checkPluginConfig(t, string(js), "")
	}
}
