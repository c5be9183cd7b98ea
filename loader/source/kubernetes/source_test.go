package kubernetes

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/loctree/loctree/shared"
)

const reviews = "reviews.default.svc.cluster.local"

var reviewsHosts = []string{"reviews:9080", "reviews.default:9080", "reviews.default.svc:9080", reviews + ":9080", "reviews", "reviews.default", "reviews.default.svc"}

func clusterNodes() []*corev1.Node {
	return []*corev1.Node{
		node("n1", zoneLabels("r1", "z1", "s1", "net1")),
		node("n2", zoneLabels("r1", "z2", "", "net1")),
		node("n3", nil),
	}
}

// TestServiceLifecycle drives create, update and delete of a Service and its
// two EndpointSlices through the real informers and checks each converged spec.
func TestServiceLifecycle(t *testing.T) {
	client := newClient()
	for _, n := range clusterNodes() {
		must(t)(client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}))
	}
	c := run(t, client, "n1")
	first := c.waitFor(t, 0, "the first update", func(u Update) bool { return u.Locality != nil })
	if want := (shared.Locality{"region": "r1", "zone": "z1", "subzone": "s1", "network": "net1", "node": "n1", "cluster": "c1",
		LabelRegion: "r1", LabelZone: "z1", LabelSubzone: "s1", LabelNetwork: "net1"}); !reflect.DeepEqual(first.Locality, want) {
		t.Fatalf("own locality = %v, want %v", first.Locality, want)
	}
	if len(first.Topology.Nodes) != 3 {
		t.Fatalf("nodes = %v, want 3", first.Topology.Nodes)
	}

	// Slices first, then the Service: nothing is managed before the Service exists.
	sa := slice("default", "reviews", "reviews-a", discoveryv1.AddressTypeIPv4, []ep{
		{addr: "127.0.1.1", node: "n1"},
		{addr: "127.0.1.2", node: "n2", ready: ptr.To(true)},
	}, 10080)
	sb := slice("default", "reviews", "reviews-b", discoveryv1.AddressTypeIPv4, []ep{
		{addr: "127.0.1.3", node: "n3", zone: "z3", ready: ptr.To(false)},
		{addr: "127.0.1.4", node: "n2", ready: ptr.To(false), serving: ptr.To(true), terminate: ptr.To(true)},
	}, 10080)
	must(t)(client.DiscoveryV1().EndpointSlices("default").Create(ctx, sa, metav1.CreateOptions{}))
	must(t)(client.DiscoveryV1().EndpointSlices("default").Create(ctx, sb, metav1.CreateOptions{}))
	svc := service("default", "reviews", "PreferClose", []string{"127.77.0.10"}, 9080)
	n := c.count()
	must(t)(client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}))

	want := shared.ServiceSpec{
		Name: reviews, Hosts: reviewsHosts, VIP: "127.77.0.10:9080",
		Scopes: []string{"network", "region", "zone"}, Mode: "failover", Health: "only_healthy",
		Endpoints: []shared.EndpointSpec{
			{Address: "127.0.1.1:10080", Locality: shared.Locality{"network": "net1", "region": "r1", "zone": "z1"}, Healthy: healthy(true)},
			{Address: "127.0.1.2:10080", Locality: shared.Locality{"network": "net1", "region": "r1", "zone": "z2"}, Healthy: healthy(true)},
			{Address: "127.0.1.3:10080", Locality: shared.Locality{"zone": "z3"}, Healthy: healthy(false)},
			{Address: "127.0.1.4:10080", Locality: shared.Locality{"network": "net1", "region": "r1", "zone": "z2"}, Healthy: healthy(false)},
		},
	}
	u := c.waitFor(t, n, "reviews created", hasSpec(reviews, want))
	checkChanged(t, u, reviews)
	mustBuild(t, u.Topology)

	// Annotation update: strict mode, least_request.
	n = c.count()
	svc.Annotations = map[string]string{AnnotationMode: "strict", AnnotationPolicy: "least_request"}
	must(t)(client.CoreV1().Services("default").Update(ctx, svc, metav1.UpdateOptions{}))
	want.Mode, want.Policy = "strict", "least_request"
	checkChanged(t, c.waitFor(t, n, "reviews strict", hasSpec(reviews, want)), reviews)

	// Endpoint update in one slice: 127.0.1.1 goes not ready.
	n = c.count()
	sa.Endpoints[0].Conditions.Ready = ptr.To(false)
	must(t)(client.DiscoveryV1().EndpointSlices("default").Update(ctx, sa, metav1.UpdateOptions{}))
	want.Endpoints[0].Healthy = healthy(false)
	c.waitFor(t, n, "127.0.1.1 unhealthy", hasSpec(reviews, want))

	// Delete the second slice.
	n = c.count()
	mustDo(t, client.DiscoveryV1().EndpointSlices("default").Delete(ctx, "reviews-b", metav1.DeleteOptions{}))
	want.Endpoints = want.Endpoints[:2]
	c.waitFor(t, n, "slice b deleted", hasSpec(reviews, want))

	// Delete the Service: its tree service goes, and Changed says so.
	n = c.count()
	mustDo(t, client.CoreV1().Services("default").Delete(ctx, "reviews", metav1.DeleteOptions{}))
	u = c.waitFor(t, n, "reviews deleted", func(u Update) bool { _, ok := findService(u, reviews); return !ok })
	checkChanged(t, u, reviews)
}

// TestOnlyChangedServicesFlagged relabels a node and checks that only the
// services with endpoints on it are flagged, and that the own locality follows.
func TestOnlyChangedServicesFlagged(t *testing.T) {
	objs := []any{
		service("default", "a", "PreferClose", []string{"127.77.0.1"}, 80),
		service("default", "b", "PreferClose", []string{"127.77.0.2"}, 80),
		slice("default", "a", "a-1", discoveryv1.AddressTypeIPv4, []ep{{addr: "127.0.2.1", node: "n1"}}, 1080),
		slice("default", "b", "b-1", discoveryv1.AddressTypeIPv4, []ep{{addr: "127.0.2.2", node: "n2"}}, 1080),
	}
	client := newClient(asObjects(objs, clusterNodes())...)
	c := run(t, client, "n1")
	first := c.waitFor(t, 0, "both services", func(u Update) bool { return len(u.Topology.Services) == 2 })
	checkChanged(t, first, "a.default.svc.cluster.local", "b.default.svc.cluster.local")

	n := c.count()
	n1 := node("n1", zoneLabels("r1", "z9", "s1", "net1"))
	must(t)(client.CoreV1().Nodes().Update(ctx, n1, metav1.UpdateOptions{}))
	u := c.waitFor(t, n, "n1 relabelled", func(u Update) bool { return u.Locality["zone"] == "z9" })
	if !u.LocalityChanged {
		t.Error("LocalityChanged = false after the own node's relabel")
	}
	checkChanged(t, u, "a.default.svc.cluster.local")
	if a, _ := findService(u, "a.default.svc.cluster.local"); a.Endpoints[0].Locality["zone"] != "z9" {
		t.Errorf("a's endpoint locality = %v, want zone z9", a.Endpoints[0].Locality)
	}

	// A Node update that changes no label publishes nothing.
	n = c.count()
	n2 := node("n2", zoneLabels("r1", "z2", "", "net1"))
	n2.Status.Phase = corev1.NodeRunning
	must(t)(client.CoreV1().Nodes().Update(ctx, n2, metav1.UpdateOptions{}))
	must(t)(client.CoreV1().Services("default").Update(ctx, service("default", "b", "PreferSameNode", []string{"127.77.0.2"}, 80), metav1.UpdateOptions{}))
	u = c.waitFor(t, n, "b same-node", func(u Update) bool { b, _ := findService(u, "b.default.svc.cluster.local"); return len(b.Scopes) == 5 })
	checkChanged(t, u, "b.default.svc.cluster.local")
	if got := c.since(n); len(got) != 1 || got[0].LocalityChanged {
		t.Errorf("updates after a status-only node change and one service change = %d (want 1, locality unchanged)", len(got))
	}
}

// TestSliceMovesToAnotherService: relabelling an EndpointSlice to another
// Service takes its endpoints from the first and gives them to the second.
func TestSliceMovesToAnotherService(t *testing.T) {
	sl := slice("default", "a", "moving", discoveryv1.AddressTypeIPv4, []ep{{addr: "127.0.6.1", node: "n1"}}, 1080)
	objs := []any{
		service("default", "a", "PreferClose", []string{"127.77.0.1"}, 80),
		service("default", "b", "PreferClose", []string{"127.77.0.2"}, 80),
		sl,
	}
	client := newClient(asObjects(objs, clusterNodes())...)
	c := run(t, client, "n1")
	c.waitFor(t, 0, "a with the endpoint", func(u Update) bool {
		a, _ := findService(u, "a.default.svc.cluster.local")
		return len(a.Endpoints) == 1
	})
	n := c.count()
	sl.Labels[discoveryv1.LabelServiceName] = "b"
	must(t)(client.DiscoveryV1().EndpointSlices("default").Update(ctx, sl, metav1.UpdateOptions{}))
	u := c.waitFor(t, n, "the endpoint moved to b", func(u Update) bool {
		a, _ := findService(u, "a.default.svc.cluster.local")
		b, _ := findService(u, "b.default.svc.cluster.local")
		return len(a.Endpoints) == 0 && len(b.Endpoints) == 1
	})
	checkChanged(t, u, "a.default.svc.cluster.local", "b.default.svc.cluster.local")
}

func checkChanged(t *testing.T, u Update, want ...string) {
	t.Helper()
	slices.Sort(want)
	if !slices.Equal(u.Changed, want) {
		t.Errorf("Changed = %v, want %v", u.Changed, want)
	}
}

func mustBuild(t *testing.T, top *shared.Topology) *shared.Tree {
	t.Helper()
	tree, err := shared.Build(top, shared.BuildOptions{Generation: 1})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return tree
}

// must returns a checker for the (object, error) results of a client call.
func must(t *testing.T) func(any, error) {
	return func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
}

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil && !strings.Contains(err.Error(), "not found") {
		t.Fatal(err)
	}
}
