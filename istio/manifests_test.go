package istio

import (
	"encoding/json"
	"io/fs"
	"path"
	"slices"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	wasmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/wasm/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networkingv1alpha3 "istio.io/client-go/pkg/apis/networking/v1alpha3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kusttypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"

	"github.com/loctree/loctree/internal/manifest"
	"github.com/loctree/loctree/internal/topology"
	"github.com/loctree/loctree/shared"
)

// manifestFiles are the Kubernetes/Istio object files (not kustomizations,
// not the Envoy bootstrap, not the istiod values in mesh/).
func manifestFiles(t *testing.T) []string {
	t.Helper()
	var out []string
	err := fs.WalkDir(Files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || path.Base(p) == "kustomization.yaml" || strings.HasPrefix(p, "envoy/") || strings.HasPrefix(p, "mesh/") {
			return err
		}
		out = append(out, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestManifestsDecodeStrictly decodes every object in istio/ into its official
// type, rejecting unknown fields, and checks that every expected kind is there.
func TestManifestsDecodeStrictly(t *testing.T) {
	kinds := map[string]int{}
	for _, p := range manifestFiles(t) {
		for _, obj := range decodeFile(t, p) {
			kinds[obj.GetObjectKind().GroupVersionKind().Kind]++
		}
	}
	for _, k := range []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "DaemonSet", "Service", "WasmPlugin", "EnvoyFilter", "DestinationRule", "NetworkPolicy"} {
		if kinds[k] == 0 {
			t.Errorf("no %s in istio/", k)
		}
	}
}

func decodeFile(t *testing.T, p string) []runtime.Object {
	t.Helper()
	data, err := Files.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := manifest.Split(data)
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	var out []runtime.Object
	for _, d := range docs {
		obj, err := manifest.Decode(d)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		out = append(out, obj)
	}
	return out
}

// TestKustomizeBuild runs kustomize (its Go library, for real) on the
// install and the overlay, with the required inputs set, and decodes every
// object it emits strictly.
func TestKustomizeBuild(t *testing.T) {
	checkKustomization(t, "base/kustomization.yaml")
	checkKustomization(t, "install/kustomization.yaml")
	for _, dir := range installDirs {
		t.Run(dir, func(t *testing.T) {
			checkKustomization(t, path.Join(dir, "kustomization.yaml"))
			out, err := kustomizeBuild(dir, "wasmURL="+testWasmURL+"\n")
			if err != nil {
				t.Fatalf("kustomize build %s: %v", dir, err)
			}
			docs, err := manifest.Split(out)
			if err != nil {
				t.Fatal(err)
			}
			var ds *appsv1.DaemonSet
			var plugin string
			for _, d := range docs {
				obj, err := manifest.Decode(d)
				if err != nil {
					t.Fatal(err)
				}
				switch o := obj.(type) {
				case *appsv1.DaemonSet:
					ds = o
				case interface{ GetName() string }:
					if strings.Contains(string(d), "WasmPlugin") {
						plugin = string(d)
					}
				}
			}
			if ds == nil || ds.Spec.Template.Spec.Containers[0].Image != "loctree/loctree:0.1.0" || ds.Labels["app.kubernetes.io/part-of"] != "loctree" {
				t.Fatalf("kustomized DaemonSet missing, or image/labels not applied: %+v", ds)
			}
			wantFormat := map[string]string{".": "plain", "overlays/persistent-session": "base64"}[dir]
			if !strings.Contains(plugin, "header_format: "+wantFormat) {
				t.Errorf("WasmPlugin header_format is not %s:\n%s", wantFormat, plugin)
			}
		})
	}
}

func checkKustomization(t *testing.T, p string) {
	t.Helper()
	data, err := Files.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var k kusttypes.Kustomization
	if err := yaml.UnmarshalStrict(data, &k); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
}

// TestDaemonSetPrivileges pins the agent's least privileges: only CAP_BPF,
// CAP_NET_ADMIN and CAP_PERFMON, not privileged; only the mount init
// container is privileged. (cmd/loctree's TestAgentLeastPrivileges runs the
// agent with exactly these on the real kernel.)
func TestDaemonSetPrivileges(t *testing.T) {
	ds := decodeFile(t, "base/daemonset.yaml")[0].(*appsv1.DaemonSet)
	spec := ds.Spec.Template.Spec
	if !spec.HostNetwork {
		t.Error("agent is not on the host network")
	}
	agent := spec.Containers[0]
	sc := agent.SecurityContext
	if *sc.Privileged || *sc.AllowPrivilegeEscalation || !slices.Equal(sc.Capabilities.Add, []corev1.Capability{"BPF", "NET_ADMIN", "PERFMON"}) ||
		!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("agent security context = %+v", sc)
	}
	if agent.LivenessProbe.HTTPGet.Path != "/healthz" || ds.Spec.Template.Annotations["prometheus.io/scrape"] != "true" {
		t.Error("no /healthz liveness probe or no Prometheus scrape annotation")
	}
	init := spec.InitContainers[0]
	for _, vm := range init.VolumeMounts {
		if vm.MountPath == "/sys/fs/bpf" && (vm.MountPropagation == nil || *vm.MountPropagation != corev1.MountPropagationBidirectional) {
			t.Error("/sys/fs/bpf is not mounted with Bidirectional propagation in the mount container")
		}
	}
}

// TestEnvoyFilterPatchesValidate merges every EnvoyFilter CLUSTER patch value
// into the cluster istiod would generate (as MERGE does: a proto merge) with
// go-control-plane's types, and validates the result, Any payloads included.
func TestEnvoyFilterPatchesValidate(t *testing.T) {
	var n int
	for _, p := range manifestFiles(t) {
		for _, obj := range decodeFile(t, p) {
			ef, ok := obj.(*networkingv1alpha3.EnvoyFilter)
			if !ok {
				continue
			}
			for _, cp := range ef.Spec.ConfigPatches {
				js, err := protojson.Marshal(cp.Patch.Value)
				if err != nil {
					t.Fatal(err)
				}
				c := manifest.IstioOutboundCluster(cp.Match.GetCluster().GetService(), cp.Match.GetCluster().GetPortNumber())
				if err := manifest.MergeEnvoy(js, c); err != nil {
					t.Errorf("%s: %v", p, err)
				}
				if c.GetLoadBalancingPolicy().GetPolicies()[0].GetTypedExtensionConfig().GetName() != "envoy.load_balancing_policies.override_host" {
					t.Errorf("%s: patch does not set the OverrideHost policy", p)
				}
				n++
			}
		}
	}
	if n == 0 {
		t.Fatal("no EnvoyFilter patch checked")
	}
}

// TestEnvoyBootstrapValidates decodes istio/envoy/bootstrap.yaml into
// go-control-plane's Bootstrap, validates it, and checks that the wasm
// filter's inline topology builds and names the cluster the route uses.
func TestEnvoyBootstrapValidates(t *testing.T) {
	data, err := Files.ReadFile("envoy/bootstrap.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var b bootstrapv3.Bootstrap
	if err := manifest.DecodeEnvoy(data, &b); err != nil {
		t.Fatal(err)
	}
	var hcm hcmv3.HttpConnectionManager
	if err := b.StaticResources.Listeners[0].FilterChains[0].Filters[0].GetTypedConfig().UnmarshalTo(&hcm); err != nil {
		t.Fatal(err)
	}
	route := hcm.GetRouteConfig().VirtualHosts[0].Routes[0].GetRoute().GetCluster()
	if got := b.StaticResources.Clusters[0].Name; got != route {
		t.Errorf("route goes to %q, the cluster is %q", route, got)
	}
	filters := hcm.HttpFilters
	if len(filters) != 2 || filters[0].Name != "envoy.filters.http.wasm" || filters[1].Name != "envoy.filters.http.router" {
		t.Fatalf("http filters = %v, want wasm then router", filters)
	}
	var w wasmv3.Wasm
	if err := filters[0].GetTypedConfig().UnmarshalTo(&w); err != nil {
		t.Fatal(err)
	}
	var conf wrapperspb.StringValue
	if err := w.Config.Configuration.UnmarshalTo(&conf); err != nil {
		t.Fatal(err)
	}
	var pc struct {
		Topology json.RawMessage `json:"topology"`
	}
	if err := json.Unmarshal([]byte(conf.Value), &pc); err != nil {
		t.Fatalf("plugin configuration: %v", err)
	}
	top, err := topology.Parse(pc.Topology, "bootstrap.yaml plugin configuration")
	if err != nil {
		t.Fatal(err)
	}
	tree, err := shared.Build(top, shared.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tree.Service(strings.Split(route, "||")[1]); !ok {
		t.Errorf("the inline topology has no service for cluster %q", route)
	}
}
