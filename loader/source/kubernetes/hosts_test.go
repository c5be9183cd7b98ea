package kubernetes

import (
	"slices"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loctree/loctree/shared"
)

// TestSameNameInTwoNamespaces: two Services called reviews, in namespaces a
// and b, both managed. A bare name (reviews, reviews:9080) means a different
// Service to clients of each namespace (resolv.conf search path), so neither
// tree service may claim it, and the tree still builds (a host claimed twice
// is a build error that would hold back every other change). When b's
// Service goes, a's gets its bare names back.
func TestSameNameInTwoNamespaces(t *testing.T) {
	client := newClient()
	for _, n := range clusterNodes() {
		must(t)(client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}))
	}
	c := run(t, client, "n1")
	c.waitFor(t, 0, "the first update", func(u Update) bool { return u.Locality != nil })
	for i, ns := range []string{"a", "b"} {
		must(t)(client.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice(ns, "reviews", "reviews-"+ns, discoveryv1.AddressTypeIPv4,
			[]ep{{addr: "127.0.2." + string(rune('1'+i)), node: "n1"}}, 10080), metav1.CreateOptions{}))
	}
	n := c.count()
	for i, ns := range []string{"a", "b"} {
		must(t)(client.CoreV1().Services(ns).Create(ctx, service(ns, "reviews", "PreferClose", []string{"127.77.2." + string(rune('1'+i))}, 9080), metav1.CreateOptions{}))
	}
	hostsOf := func(u Update, name string) ([]string, bool) {
		s, ok := findService(u, name)
		return s.Hosts, ok
	}
	both := c.waitFor(t, n, "both Services", func(u Update) bool {
		_, a := hostsOf(u, "reviews.a.svc.cluster.local")
		_, b := hostsOf(u, "reviews.b.svc.cluster.local")
		return a && b
	})
	if _, err := shared.Build(both.Topology, shared.BuildOptions{}); err != nil {
		t.Fatalf("the tree does not build: %v", err)
	}
	for _, ns := range []string{"a", "b"} {
		h, _ := hostsOf(both, "reviews."+ns+".svc.cluster.local")
		if slices.Contains(h, "reviews") || slices.Contains(h, "reviews:9080") || !slices.Contains(h, "reviews."+ns+":9080") {
			t.Errorf("namespace %s: hosts %v, want reviews.%s:9080 and no bare reviews", ns, h, ns)
		}
	}
	n = c.count()
	if err := client.CoreV1().Services("b").Delete(ctx, "reviews", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitFor(t, n, "a's bare names back", func(u Update) bool {
		h, ok := hostsOf(u, "reviews.a.svc.cluster.local")
		_, b := hostsOf(u, "reviews.b.svc.cluster.local")
		return ok && !b && slices.Contains(h, "reviews") && slices.Contains(h, "reviews:9080")
	})
}
