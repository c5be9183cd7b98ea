// Package envoy_test validates the Envoy example against Envoy's own API
// types: no Envoy runs here, so the configuration is parsed with
// go-control-plane and checked with its generated validators.
package envoy_test

import (
	"encoding/json"
	"os"
	"testing"

	bootstrap "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	wasmfilter "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/wasm/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	overridehost "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/override_host/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/wrapperspb"
	"gopkg.in/yaml.v3"

	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/round_robin/v3"

	"github.com/loctree/loctree/host"
	"github.com/loctree/loctree/internal/testing/wasmtest"
)

func loadBootstrap(t *testing.T) *bootstrap.Bootstrap {
	t.Helper()
	raw, err := os.ReadFile("envoy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var b bootstrap.Bootstrap
	if err := protojson.Unmarshal(js, &b); err != nil {
		t.Fatalf("envoy.yaml is not a valid Envoy bootstrap: %v", err)
	}
	if err := b.ValidateAll(); err != nil {
		t.Fatalf("envoy.yaml fails Envoy's validation: %v", err)
	}
	return &b
}

func TestEnvoyExample(t *testing.T) {
	b := loadBootstrap(t)
	var c *cluster.Cluster
	for _, x := range b.GetStaticResources().GetClusters() {
		if x.GetName() == "outbound|9080||reviews.default.svc.cluster.local" {
			c = x
		}
	}
	if c == nil {
		t.Fatal("no reviews cluster")
	}
	var oh overridehost.OverrideHost
	if err := c.GetLoadBalancingPolicy().GetPolicies()[0].GetTypedExtensionConfig().GetTypedConfig().UnmarshalTo(&oh); err != nil {
		t.Fatal(err)
	}
	if got := oh.GetOverrideHostSources()[0].GetHeader(); got != "x-gateway-destination-endpoint" {
		t.Fatalf("override host header %q", got)
	}

	var m hcm.HttpConnectionManager
	if err := b.GetStaticResources().GetListeners()[0].GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(&m); err != nil {
		t.Fatal(err)
	}
	var w wasmfilter.Wasm
	if err := m.GetHttpFilters()[0].GetTypedConfig().UnmarshalTo(&w); err != nil {
		t.Fatal(err)
	}
	var cfg wrapperspb.StringValue
	if err := w.GetConfig().GetConfiguration().UnmarshalTo(&cfg); err != nil {
		t.Fatal(err)
	}
	// The plugin configuration Envoy would hand the filter must be one the
	// filter accepts: run it through the real .wasm's start-up.
	checkPluginConfig(t, cfg.GetValue(), w.GetConfig().GetRootId())
}

func checkPluginConfig(t *testing.T, config, rootID string) {
	t.Helper()
	h, err := host.New(t.Context(), wasmtest.Bytes(t, "../../filter"), host.Options{PluginConfig: []byte(config), RootID: rootID, ManualTicks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(t.Context())
	vm, err := h.NewVM(t.Context())
	if err != nil {
		t.Fatalf("the filter rejects the example's configuration: %v (%v)", err, h.Logs())
	}
	vm.Close()
}
