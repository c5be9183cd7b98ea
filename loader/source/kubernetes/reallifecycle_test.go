package kubernetes

import (
	"context"
	"io"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestRealServerLifecycle is TestServiceLifecycle on a real API server,
// with the source running before anything exists, so that every change
// arrives by watch: slices before their Service (nothing managed), the
// Service, an annotation update, an endpoint going not ready, a slice
// deleted, a Node relabelled, the Service deleted.
func TestRealServerLifecycle(t *testing.T) {
	r := onRealServer(t)
	ctx := context.Background()
	c := runFromKubeconfig(t, kubeconfig(t, r.cp.Admin()), r.ns+"-a", io.Discard)
	r.node(t, "a", zoneLabels("r1", "z1", "s1", "net1"))
	r.node(t, "b", zoneLabels("r1", "z2", "", "net1"))
	a := r.create(t, realSlice("reviews", "reviews-a", discoveryv1.AddressTypeIPv4, []realEP{
		{addr: "192.0.2.1", node: r.ns + "-a"}, {addr: "192.0.2.2", node: r.ns + "-b", ready: ptr.To(true)},
	})).(*discoveryv1.EndpointSlice)
	r.create(t, realSlice("reviews", "reviews-b", discoveryv1.AddressTypeIPv4, []realEP{
		{addr: "192.0.2.3", node: r.ns + "-b", ready: ptr.To(false), serving: ptr.To(true), terminating: ptr.To(true)},
	}))
	n := c.count()
	r.create(t, realService("reviews", "PreferSameZone"))
	fq := r.fqdn("reviews")
	checkChanged(t, c.waitFor(t, n, "reviews created", r.states(fq, "192.0.2.1:19080 true, 192.0.2.2:19080 true, 192.0.2.3:19080 false")), fq)

	n = c.count()
	r.setMode(t, "strict")
	c.waitFor(t, n, "reviews strict", func(u Update) bool { s, _ := findService(u, fq); return s.Mode == "strict" })

	n = c.count()
	a.Endpoints[0].Conditions.Ready = ptr.To(false)
	must(t)(r.admin.DiscoveryV1().EndpointSlices(r.ns).Update(ctx, a, metav1.UpdateOptions{}))
	c.waitFor(t, n, "192.0.2.1 not ready", r.states(fq, "192.0.2.1:19080 false, 192.0.2.2:19080 true, 192.0.2.3:19080 false"))

	n = c.count()
	mustDo(t, r.admin.DiscoveryV1().EndpointSlices(r.ns).Delete(ctx, "reviews-b", metav1.DeleteOptions{}))
	c.waitFor(t, n, "reviews-b deleted", r.states(fq, "192.0.2.1:19080 false, 192.0.2.2:19080 true"))

	n = c.count()
	r.relabel(t, "b", LabelZone, "z9")
	c.waitFor(t, n, "b in z9", func(u Update) bool {
		s, _ := findService(u, fq)
		return len(s.Endpoints) == 2 && s.Endpoints[1].Locality["zone"] == "z9"
	})

	n = c.count()
	mustDo(t, r.admin.CoreV1().Services(r.ns).Delete(ctx, "reviews", metav1.DeleteOptions{}))
	u := c.waitFor(t, n, "reviews deleted", func(u Update) bool { _, ok := findService(u, fq); return !ok })
	checkChanged(t, u, fq)
}

// states is the condition that tree service name has these endpoint states.
func (r *realServer) states(name, want string) func(Update) bool {
	return func(u Update) bool { s, ok := findService(u, name); return ok && endpointStates(s) == want }
}

// relabel sets one label of the test's Node <ns>-<name>.
func (r *realServer) relabel(t *testing.T, name, key, value string) {
	t.Helper()
	ctx := context.Background()
	n, err := r.admin.CoreV1().Nodes().Get(ctx, r.ns+"-"+name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Labels[key] = value
	must(t)(r.admin.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}))
}
