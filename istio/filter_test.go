package istio

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	istioext "istio.io/client-go/pkg/apis/extensions/v1alpha1"

	"github.com/tetratelabs/wazero"

	"github.com/loctree/loctree/host"
	"github.com/loctree/loctree/internal/testing/wasmtest"
	"github.com/loctree/loctree/istio/render"
	"github.com/loctree/loctree/loader"
	"github.com/loctree/loctree/shared"
)

// TestPluginConfigsRunInTheFilter starts the real filter .wasm (built as
// `make wasm` does) in the wazero host with each WasmPlugin pluginConfig that
// istio/ ships or `loctree istio render` prints: the plugin must start, fetch
// the tree from the agent's TreeServer through the cluster the config names
// (mapped to a real HTTP server on 127.0.0.1), and steer a request for
// reviews to the endpoint in the proxy's zone, in the header and format the
// steering mode needs.
func TestPluginConfigsRunInTheFilter(t *testing.T) {
	module := wasmtest.Bytes(t, "../filter")
	srv := treeServer(t)
	for name, tc := range map[string]struct {
		plugin         *istioext.WasmPlugin
		header, format string
	}{
		"base":                        {shippedPlugin(t), render.OverrideHostHeader, "plain"},
		"overlays/persistent-session": {kustomizedPlugin(t, "overlays/persistent-session"), render.SessionHeader, "base64"},
		"render override-host":        {renderedPlugin(t, render.SteeringOverrideHost), render.OverrideHostHeader, "plain"},
		"render persistent-session":   {renderedPlugin(t, render.SteeringPersistentSession), render.SessionHeader, "base64"},
	} {
		t.Run(name, func(t *testing.T) {
			conf, err := protojson.Marshal(tc.plugin.Spec.PluginConfig)
			if err != nil {
				t.Fatal(err)
			}
			got := steer(t, module, conf, srv.URL, tc.header)
			want := "127.0.1.1:10080"
			if tc.format == "base64" {
				want = base64.StdEncoding.EncodeToString([]byte(want))
			}
			if first, _, _ := strings.Cut(got, ","); first != want {
				t.Errorf("%s = %q, want %q first", tc.header, got, want)
			}
		})
	}
}

var wasmCache = wazero.NewCompilationCache()

// treeServer is the agent's TreeServer serving a tree with reviews, one
// endpoint in r1/z1 and one in r1/z2.
func treeServer(t *testing.T) *httptest.Server {
	t.Helper()
	top := &shared.Topology{Services: []shared.ServiceSpec{{
		Name: "reviews.default.svc.cluster.local", Hosts: []string{"reviews:9080", "reviews.default.svc.cluster.local:9080"},
		Scopes: []string{"region", "zone"},
		Endpoints: []shared.EndpointSpec{
			{Address: "127.0.1.1:10080", Locality: shared.Locality{"region": "r1", "zone": "z1"}},
			{Address: "127.0.1.2:10080", Locality: shared.Locality{"region": "r1", "zone": "z2"}},
		},
	}}}
	tree, err := shared.Build(top, shared.BuildOptions{Generation: 1})
	if err != nil {
		t.Fatal(err)
	}
	var trees loader.TreeServer
	trees.Set(tree)
	mux := http.NewServeMux()
	mux.Handle("/v1/tree", &trees)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// steer runs one request for reviews:9080 from a proxy in r1/z1 and returns
// the header the filter wrote.
func steer(t *testing.T, module, conf []byte, agentURL, header string) string {
	t.Helper()
	h, vm := filterVM(t, module, conf, agentURL, nil)
	return reviewsRequest(t, h, vm, header)
}

// filterVM starts the filter with conf in a proxy in r1/z1 (with Envoy's
// stats_tags tags) and lets it fetch the tree from agentURL.
func filterVM(t *testing.T, module, conf []byte, agentURL string, tags []host.StatTag) (*host.Host, *host.VM) {
	t.Helper()
	props := host.NewProperties()
	props.SetString(host.SplitPath("xds.node.locality.region"), "r1")
	props.SetString(host.SplitPath("xds.node.locality.zone"), "z1")
	ctx := context.Background()
	h, err := host.New(ctx, module, host.Options{PluginConfig: conf, Properties: props, ManualTicks: true, Cache: wasmCache,
		Upstreams: map[string]string{render.TreeCluster: agentURL}, StatTags: tags})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(ctx) })
	vm, err := h.NewVM(ctx)
	if err != nil {
		t.Fatalf("the filter rejects this pluginConfig: %v (logs: %v)", err, h.Logs())
	}
	t.Cleanup(func() { vm.Close() })
	if err := vm.Tick(); err != nil {
		t.Fatal(err)
	}
	vm.WaitHTTPCalls()
	return h, vm
}

// reviewsRequest sends a request for reviews:9080 and returns header.
func reviewsRequest(t *testing.T, h *host.Host, vm *host.VM, header string) string {
	t.Helper()
	reqProps := host.NewProperties()
	reqProps.SetString(host.SplitPath("xds.cluster_name"), "outbound|9080||reviews.default.svc.cluster.local")
	res, err := vm.Do(context.Background(), &host.Request{
		Headers:    host.Headers{{":method", "GET"}, {":path", "/"}, {":scheme", "http"}, {":authority", "reviews:9080"}},
		Properties: reqProps,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := res.Request.Headers.Get(header)
	if !ok {
		t.Fatalf("no %s header; request %v; logs %v", header, res.Request.Headers, h.Logs())
	}
	return got
}

func shippedPlugin(t *testing.T) *istioext.WasmPlugin {
	t.Helper()
	return decodeFile(t, "base/wasmplugin.yaml")[0].(*istioext.WasmPlugin)
}

func kustomizedPlugin(t *testing.T, dir string) *istioext.WasmPlugin {
	t.Helper()
	out, err := kustomizeBuild(dir, "wasmURL="+testWasmURL+"\n")
	if err != nil {
		t.Fatal(err)
	}
	return pluginIn(t, out)
}

func renderedPlugin(t *testing.T, st render.Steering) *istioext.WasmPlugin {
	t.Helper()
	objs, err := render.Render(render.Options{Service: "reviews.default", Port: 9080, Steering: st, WasmURL: testWasmURL})
	if err != nil {
		t.Fatal(err)
	}
	return objs[0].(*istioext.WasmPlugin)
}
