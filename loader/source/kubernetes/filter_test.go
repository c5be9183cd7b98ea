package kubernetes_test

import (
	"context"
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/loctree/loctree/host"
	"github.com/loctree/loctree/internal/testing/wasmtest"
	"github.com/loctree/loctree/loader/source/kubernetes"
)

// TestFilterPicksPerPortWithIstioMetadata: the Kubernetes source names a
// two-port Service's tree services; the real filter .wasm, given that
// topology and only what an Istio sidecar on node n2 exposes (node locality
// and NETWORK metadata, no configured locality), picks n2's endpoint at the
// target port of the port the request is for, by cluster name and by
// authority. The default scopes start with network, so the pick is n2's
// only if the filter read NETWORK; the header lists every candidate
// (fallbacks), so a wider candidate set shows.
func TestFilterPicksPerPortWithIstioMetadata(t *testing.T) {
	client := fake.NewClientset(twoPortObjects()...)
	updates := make(chan kubernetes.Update, 64)
	startSource(t, client, updates)
	u := next(t, updates, func(u kubernetes.Update) bool { return len(u.Topology.Services) == 2 })
	top, err := json.Marshal(u.Topology)
	if err != nil {
		t.Fatal(err)
	}
	props := host.NewProperties()
	for path, v := range map[string]string{"xds.node.metadata.NETWORK": "net2",
		"xds.node.locality.region": "r1", "xds.node.locality.zone": "z1"} {
		props.SetString(host.SplitPath(path), v)
	}
	h, err := host.New(context.Background(), wasmtest.Bytes(t, "../../../filter"), host.Options{
		PluginConfig: []byte(`{"topology":` + string(top) + `,"fallbacks":2}`), Properties: props})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	vm, err := h.NewVM(context.Background())
	if err != nil {
		t.Fatalf("filter start: %v (%v)", err, h.Logs())
	}
	defer vm.Close()
	const fqdn = "details.default.svc.cluster.local"
	for _, c := range []struct{ cluster, authority, want string }{
		{"outbound|9080||" + fqdn, "details:9080", "127.0.11.2:10080"},
		{"outbound|9443||" + fqdn, "details:9443", "127.0.11.2:10443"},
		{"outbound|9443|v1|" + fqdn, "details:9443", "127.0.11.2:10443"},
		{"", "details:9443", "127.0.11.2:10443"},
		{"", fqdn + ":9443", "127.0.11.2:10443"},
		{"", "details.default", "127.0.11.2:10080"},
		{"", "details.default.svc:9080", "127.0.11.2:10080"},
	} {
		rp := host.NewProperties()
		if c.cluster != "" {
			rp.SetString(host.SplitPath("xds.cluster_name"), c.cluster)
		}
		res, err := vm.Do(context.Background(), &host.Request{
			Headers:    host.Headers{{":method", "GET"}, {":path", "/"}, {":scheme", "http"}, {":authority", c.authority}},
			Properties: rp,
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := res.Request.Headers.Get("x-gateway-destination-endpoint"); got != c.want {
			t.Errorf("cluster %q, authority %q: filter wrote %q, want %q", c.cluster, c.authority, got, c.want)
		}
	}
}

// twoPortObjects: nodes n1 (net1), n2 (net2), n3 (net1), all in r1/z1; the
// Service details (PreferClose) with ports 9080→10080 and 9443→10443 and an
// endpoint on each node.
func twoPortObjects() []runtime.Object {
	node := func(name, network string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			kubernetes.LabelRegion: "r1", kubernetes.LabelZone: "z1", kubernetes.LabelNetwork: network}}}
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "details"},
		Spec: corev1.ServiceSpec{
			ClusterIP: "127.77.11.1", ClusterIPs: []string{"127.77.11.1"}, TrafficDistribution: ptr.To("PreferClose"),
			Ports: []corev1.ServicePort{
				{Name: "http", Port: 9080, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(10080)},
				{Name: "https", Port: 9443, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(10443)},
			},
		},
	}
	ep := func(addr, node string) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{addr}, NodeName: ptr.To(node), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}
	}
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: "details-a", Labels: map[string]string{discoveryv1.LabelServiceName: "details"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{
			{Name: ptr.To("http"), Port: ptr.To[int32](10080), Protocol: ptr.To(corev1.ProtocolTCP)},
			{Name: ptr.To("https"), Port: ptr.To[int32](10443), Protocol: ptr.To(corev1.ProtocolTCP)},
		},
		Endpoints: []discoveryv1.Endpoint{ep("127.0.11.1", "n1"), ep("127.0.11.2", "n2"), ep("127.0.11.3", "n3")},
	}
	return []runtime.Object{node("n1", "net1"), node("n2", "net2"), node("n3", "net1"), svc, sl}
}
