package manifest

import (
	"errors"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	extv1alpha1 "istio.io/client-go/pkg/apis/extensions/v1alpha1"
	corev1 "k8s.io/api/core/v1"
)

const service = `apiVersion: v1
kind: Service
metadata:
  name: reviews
  namespace: default
spec:
  ports:
  - port: 9080
`

const plugin = `apiVersion: extensions.istio.io/v1alpha1
kind: WasmPlugin
metadata:
  name: loctree
  namespace: istio-system
spec:
  url: oci://registry.example.com/loctree/loctree-wasm:0.1.0
  match:
  - mode: CLIENT
  pluginConfig:
    header: x-gateway-destination-endpoint
`

func TestDecode(t *testing.T) {
	obj, err := Decode([]byte(service))
	if svc, ok := obj.(*corev1.Service); err != nil || !ok || svc.Spec.Ports[0].Port != 9080 {
		t.Fatalf("Decode(service) = %T %v", obj, err)
	}
	obj, err = Decode([]byte(plugin))
	wp, ok := obj.(*extv1alpha1.WasmPlugin)
	if err != nil || !ok || wp.Name != "loctree" || wp.Spec.Match[0].Mode.String() != "CLIENT" ||
		wp.Spec.PluginConfig.Fields["header"].GetStringValue() != "x-gateway-destination-endpoint" {
		t.Fatalf("Decode(plugin) = %+v %v", obj, err)
	}
}

// TestDecodeRejects: every kind of unknown field, and unknown kinds, fail.
func TestDecodeRejects(t *testing.T) {
	tests := map[string]string{
		"k8s spec field":        strings.Replace(service, "  ports:", "  portz: 1\n  ports:", 1),
		"k8s duplicate field":   strings.Replace(service, "  name: reviews", "  name: reviews\n  name: other", 1),
		"istio spec field":      strings.Replace(plugin, "  url:", "  urll: x\n  url:", 1),
		"istio enum value":      strings.Replace(plugin, "CLIENT", "CLIENTS", 1),
		"istio top-level field": plugin + "specs: {}\n",
		"istio metadata field":  strings.Replace(plugin, "  name: loctree", "  name: loctree\n  nmae: x", 1),
		"unknown kind":          strings.Replace(service, "kind: Service", "kind: Servise", 1),
	}
	for name, doc := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := Decode([]byte(doc)); !errors.Is(err, ErrInvalid) {
				t.Errorf("err = %v, want ErrInvalid", err)
			}
		})
	}
}

func TestSplit(t *testing.T) {
	docs, err := Split([]byte("# only a comment\n---\n" + service + "---\n" + plugin + "---\n"))
	if err != nil || len(docs) != 2 {
		t.Fatalf("Split = %d docs, %v; want 2", len(docs), err)
	}
}

const overrideCluster = `name: c
type: STATIC
connect_timeout: 1s
load_balancing_policy:
  policies:
  - typed_extension_config:
      name: envoy.load_balancing_policies.override_host
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.load_balancing_policies.override_host.v3.OverrideHost
        override_host_sources:
        - header: x-gateway-destination-endpoint
        fallback_policy:
          policies:
          - typed_extension_config:
              name: envoy.load_balancing_policies.round_robin
              typed_config:
                "@type": type.googleapis.com/envoy.extensions.load_balancing_policies.round_robin.v3.RoundRobin
`

// TestDecodeEnvoy: a valid cluster passes; an invalid message packed in an Any
// (which ValidateAll alone does not open), an unknown field and an unknown
// type URL fail.
func TestDecodeEnvoy(t *testing.T) {
	if err := DecodeEnvoy([]byte(overrideCluster), &clusterv3.Cluster{}); err != nil {
		t.Fatal(err)
	}
	noSources := strings.Replace(overrideCluster, "        override_host_sources:\n        - header: x-gateway-destination-endpoint\n", "        override_host_sources: []\n", 1)
	var c clusterv3.Cluster
	err := DecodeEnvoy([]byte(noSources), &c)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "OverrideHostSources") {
		t.Errorf("empty override_host_sources: err = %v", err)
	}
	if c.ValidateAll() != nil {
		t.Error("ValidateAll alone rejected the cluster; the Any walk is then untested")
	}
	bad := map[string]string{
		"unknown field":    strings.Replace(overrideCluster, "type: STATIC", "type: STATIC\nlb_polcy: ROUND_ROBIN", 1),
		"unknown type":     strings.Replace(overrideCluster, "override_host.v3.OverrideHost", "override_host.v3.Nope", 1),
		"rule on the root": strings.Replace(overrideCluster, "name: c\n", "name: \"\"\n", 1),
	}
	for name, doc := range bad {
		if err := DecodeEnvoy([]byte(doc), &clusterv3.Cluster{}); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(service))
	f.Add([]byte(plugin))
	f.Fuzz(func(t *testing.T, doc []byte) {
		obj, err := Decode(doc)
		if err == nil && obj == nil {
			t.Fatal("nil object without an error")
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Fatalf("error %v does not wrap ErrInvalid", err)
		}
	})
}
