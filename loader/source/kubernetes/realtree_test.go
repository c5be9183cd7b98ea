package kubernetes

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/netip"
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/loctree/loctree/shared"
)

// TestRealServerTree writes Services of every opt-in form (spec
// trafficDistribution PreferClose, PreferSameZone, PreferSameNode, the
// Namespace's annotation, the Service's annotation over the Namespace's,
// opted out), several EndpointSlices per Service
// (112 endpoints; ready, unknown, not ready, terminating serving and not;
// hints; dual-stack), and Nodes with topology labels to a real API server.
// The source's tree holds what the server stored (allocated cluster IPs,
// defaulted protocols and target ports), and is byte-identical to the tree
// the same stored objects give through client-go's fake clientset, which
// the other tests of this package use, and to the tree of a topology file
// written from the source's services and read by the agent's file source.
func TestRealServerTree(t *testing.T) {
	r := onRealServer(t)
	nodes := []*corev1.Node{
		r.node(t, "a", zoneLabels("r1", "z1", "s1", "net1")),
		r.node(t, "b", zoneLabels("r1", "z2", "", "net1")),
		r.node(t, "c", nil),
	}
	r.annotateNamespace(t, AnnotationTrafficDistribution, "PreferSameNode")
	stored := r.createScenario(t, nodes)
	r.checkRefusesLoopback(t)

	c := runFromKubeconfig(t, kubeconfig(t, r.cp.Admin()), nodes[0].Name, io.Discard)
	u := c.waitFor(t, 0, "the test's seven tree services", func(u Update) bool { return len(r.ownServices(u)) == 7 })
	got, ok := findService(u, r.fqdn("reviews"))
	if want := r.wantReviews(stored, nodes); !ok || !reflect.DeepEqual(got, want) {
		t.Errorf("reviews:\n got %+v\nwant %+v", got, want)
	}
	r.checkForms(t, u, stored)
	r.checkSameAsFake(t, u, nodes)
	r.checkSameAsFile(t, u)
}

func (r *realServer) annotateNamespace(t *testing.T, key, value string) {
	t.Helper()
	ns, err := r.admin.CoreV1().Namespaces().Get(context.Background(), r.ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns.Annotations = map[string]string{key: value}
	if _, err := r.admin.CoreV1().Namespaces().Update(context.Background(), ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// createScenario creates the Services and EndpointSlices and returns the
// Services as stored, by name.
func (r *realServer) createScenario(t *testing.T, nodes []*corev1.Node) map[string]*corev1.Service {
	t.Helper()
	stored := map[string]*corev1.Service{}
	forms := []struct{ name, td string }{
		{"reviews", "PreferClose"}, {"ratings", "PreferSameZone"}, {"details", "PreferSameNode"},
		{"dual", "PreferClose"}, {"nsdefault", ""}, {"svcannotated", ""}, {"off", "PreferClose"},
	}
	for _, f := range forms {
		svc := realService(f.name, f.td)
		switch f.name {
		case "dual":
			svc.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyRequireDualStack)
			svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
		case "svcannotated": // Istio's annotation on the Service wins over the Namespace's PreferSameNode
			svc.Annotations = map[string]string{AnnotationTrafficDistribution: "PreferSameZone"}
		case "off":
			svc.Annotations = map[string]string{AnnotationEnabled: "false"}
		}
		stored[f.name] = r.create(t, svc).(*corev1.Service)
	}
	for _, sl := range reviewsSlices(nodes) {
		r.create(t, sl)
	}
	for i, name := range []string{"ratings", "details", "dual", "nsdefault", "svcannotated", "off"} {
		r.create(t, realSlice(name, name+"-v4", discoveryv1.AddressTypeIPv4, []realEP{
			{addr: fmt.Sprintf("198.51.100.%d", 2*i+1), node: nodes[0].Name, ready: ptr.To(true)},
			{addr: fmt.Sprintf("198.51.100.%d", 2*i+2), node: nodes[1].Name, ready: ptr.To(true)},
		}))
	}
	r.create(t, realSlice("dual", "dual-v6", discoveryv1.AddressTypeIPv6, []realEP{
		{addr: "2001:db8::1", node: nodes[0].Name}, {addr: "2001:db8::2", node: nodes[2].Name, zone: "z3"},
	}))
	return stored
}

// realService is a Service with one port named http, 9080, leaving the
// protocol, target port and cluster IP for the server to default and allocate.
func realService(name, td string) *corev1.Service {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 9080}}}}
	if td != "" {
		svc.Spec.TrafficDistribution = ptr.To(td)
	}
	return svc
}

// realEP is an endpoint of a realSlice.
type realEP struct {
	addr, node, zone            string
	ready, serving, terminating *bool
	hint                        bool
}

// realSlice is an EndpointSlice of Service svc, port http 19080 with no
// protocol (the server defaults it to TCP).
func realSlice(svc, name string, typ discoveryv1.AddressType, eps []realEP) *discoveryv1.EndpointSlice {
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: typ,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](19080)}},
	}
	for _, e := range eps {
		d := discoveryv1.Endpoint{Addresses: []string{e.addr},
			Conditions: discoveryv1.EndpointConditions{Ready: e.ready, Serving: e.serving, Terminating: e.terminating}}
		if e.node != "" {
			d.NodeName = ptr.To(e.node)
		}
		if e.zone != "" {
			d.Zone = ptr.To(e.zone)
		}
		if e.hint && e.zone != "" {
			d.Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: e.zone}}}
		}
		sl.Endpoints = append(sl.Endpoints, d)
	}
	return sl
}

// reviewsEP is endpoint i of reviews (1..112): 192.0.2.i on node i%3 (the
// third with no labels, its slice zone z3); every tenth not ready, every
// seventh with ready unset (ready, by the API's definition); 111 and 112
// terminating, 111 still serving.
func reviewsEP(i int, nodes []*corev1.Node) realEP {
	e := realEP{addr: fmt.Sprintf("192.0.2.%d", i), node: nodes[i%3].Name, ready: ptr.To(i%10 != 0), hint: i > 60}
	if i%3 == 2 {
		e.zone = "z3"
	}
	if i%7 == 0 {
		e.ready = nil
	}
	if i > 110 {
		e.ready, e.serving, e.terminating = ptr.To(false), ptr.To(i == 111), ptr.To(true)
	}
	return e
}

// reviewsSlices spread reviews' 112 endpoints over three slices.
func reviewsSlices(nodes []*corev1.Node) []*discoveryv1.EndpointSlice {
	var out []*discoveryv1.EndpointSlice
	for j, span := range [][2]int{{1, 60}, {61, 110}, {111, 112}} {
		var eps []realEP
		for i := span[0]; i <= span[1]; i++ {
			eps = append(eps, reviewsEP(i, nodes))
		}
		out = append(out, realSlice("reviews", fmt.Sprintf("reviews-%d", j+1), discoveryv1.AddressTypeIPv4, eps))
	}
	return out
}

// wantReviews is reviews' tree service, from the test's own data and the
// cluster IP the server allocated; terminating endpoints are unhealthy as
// ready ones exist (kube-proxy's rule, docs/ISTIO.md).
func (r *realServer) wantReviews(stored map[string]*corev1.Service, nodes []*corev1.Node) shared.ServiceSpec {
	fq := r.fqdn("reviews")
	short := "reviews." + r.ns
	want := shared.ServiceSpec{
		Name:  fq,
		Hosts: []string{"reviews:9080", short + ":9080", short + ".svc:9080", fq + ":9080", "reviews", short, short + ".svc"},
		VIP:   stored["reviews"].Spec.ClusterIP + ":9080", Scopes: []string{"network", "region", "zone"},
		Mode: "failover", Health: "only_healthy",
	}
	// By i%3: node a, node b, node c (no labels: the slice's zone).
	locs := []shared.Locality{{"network": "net1", "region": "r1", "zone": "z1"}, {"network": "net1", "region": "r1", "zone": "z2"}, {"zone": "z3"}}
	for i := 1; i <= 112; i++ {
		e := reviewsEP(i, nodes)
		live := (e.ready == nil || *e.ready) && e.terminating == nil
		loc := locs[i%3]
		want.Endpoints = append(want.Endpoints, shared.EndpointSpec{Address: e.addr + ":19080", Locality: loc, Healthy: healthy(live)})
	}
	slices.SortFunc(want.Endpoints, func(a, b shared.EndpointSpec) int {
		return netip.MustParseAddrPort(a.Address).Compare(netip.MustParseAddrPort(b.Address))
	})
	return want
}

// checkForms checks the scopes each opt-in form gives and the VIPs the
// server allocated, the second family's included.
func (r *realServer) checkForms(t *testing.T, u Update, stored map[string]*corev1.Service) {
	t.Helper()
	tests := []struct {
		name, svc, vip string
		scopes         int
	}{
		{r.fqdn("ratings"), "ratings", stored["ratings"].Spec.ClusterIPs[0] + ":9080", 3},
		{r.fqdn("details"), "details", stored["details"].Spec.ClusterIPs[0] + ":9080", 5},
		{r.fqdn("dual"), "dual", stored["dual"].Spec.ClusterIPs[0] + ":9080", 3},
		{r.fqdn("dual") + "#ipv6", "dual", "[" + stored["dual"].Spec.ClusterIPs[1] + "]:9080", 3},
		{r.fqdn("nsdefault"), "nsdefault", stored["nsdefault"].Spec.ClusterIPs[0] + ":9080", 5},
		{r.fqdn("svcannotated"), "svcannotated", stored["svcannotated"].Spec.ClusterIPs[0] + ":9080", 3},
	}
	for _, tt := range tests {
		got, ok := findService(u, tt.name)
		if !ok || got.VIP != tt.vip || len(got.Scopes) != tt.scopes || len(got.Endpoints) != 2 {
			t.Errorf("%s = %+v (found %v), want VIP %s, %d scopes, 2 endpoints", tt.name, got, ok, tt.vip, tt.scopes)
		}
	}
	if _, ok := findService(u, r.fqdn("off")); ok {
		t.Errorf("%s is in the tree, but opted out", r.fqdn("off"))
	}
}

// checkRefusesLoopback: the server refuses a loopback endpoint address,
// which is why the tests' endpoint addresses are documentation ranges.
func (r *realServer) checkRefusesLoopback(t *testing.T) {
	t.Helper()
	sl := realSlice("reviews", "loopback", discoveryv1.AddressTypeIPv4, []realEP{{addr: "127.0.0.1", node: r.ns + "-a"}})
	sl.Namespace = r.ns
	_, err := r.admin.DiscoveryV1().EndpointSlices(r.ns).Create(context.Background(), sl, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Errorf("create an EndpointSlice with 127.0.0.1: %v, want invalid", err)
	}
}

// checkSameAsFake runs the source on client-go's fake clientset holding
// the objects as the real server stored them, and compares the trees.
func (r *realServer) checkSameAsFake(t *testing.T, real Update, nodes []*corev1.Node) {
	t.Helper()
	ctx := context.Background()
	ns, err := r.admin.CoreV1().Namespaces().Get(ctx, r.ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	objs := []runtime.Object{ns}
	for _, n := range nodes {
		objs = append(objs, n)
	}
	svcs, err1 := r.admin.CoreV1().Services(r.ns).List(ctx, metav1.ListOptions{})
	sls, err2 := r.admin.DiscoveryV1().EndpointSlices(r.ns).List(ctx, metav1.ListOptions{})
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	for i := range svcs.Items {
		objs = append(objs, &svcs.Items[i])
	}
	for i := range sls.Items {
		objs = append(objs, &sls.Items[i])
	}
	c := run(t, newClient(objs...), nodes[0].Name)
	fake := c.waitFor(t, 0, "the fake's seven tree services", func(u Update) bool { return len(r.ownServices(u)) == 7 })
	gotReal, gotFake := r.ownTree(t, real), r.ownTree(t, fake)
	if !bytes.Equal(gotReal, gotFake) {
		t.Errorf("trees differ: real server %s; fake %s", describe(r.ownServices(real)), describe(r.ownServices(fake)))
	}
}

// ownTree encodes the test's own services and nodes of u.
func (r *realServer) ownTree(t *testing.T, u Update) []byte {
	t.Helper()
	top := &shared.Topology{Services: r.ownServices(u)}
	for _, n := range u.Topology.Nodes {
		if len(n.Name) > len(r.ns) && n.Name[:len(r.ns)] == r.ns {
			top.Nodes = append(top.Nodes, n)
		}
	}
	return mustBuild(t, top).Bytes()
}
