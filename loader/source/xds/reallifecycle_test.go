package xds

import (
	"context"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestRealChanges follows a real istiod through the changes a cluster
// makes: a pod's readiness flips, a pod is deleted, a pod is added in
// another zone, a Service is deleted; then istiod is killed: the source
// keeps its last tree and reports itself down, a pod added and a Service
// deleted meanwhile arrive after istiod is back (the source reconnects
// with initial_resource_versions, and istiod removes what it no longer
// has), and no update ever left web without endpoints.
func TestRealChanges(t *testing.T) {
	c := onRealIstiod(t)
	for _, n := range scenarioNodes {
		c.node(t, n.name, n.region, n.zone, n.subzone)
	}
	pods := []realPod{
		{name: "w1", node: "a", ip: "100.64.1.1", app: "web", ready: true},
		{name: "w2", node: "b", ip: "100.64.1.2", app: "web", ready: true},
		{name: "x1", node: "a", ip: "100.64.2.1", app: "other", ready: true},
		{name: "y1", node: "b", ip: "100.64.3.1", app: "gone", ready: true},
	}
	for _, s := range []string{"web", "other", "gone"} {
		c.service(t, realSvc{name: s, td: "PreferSameZone"})
	}
	for _, p := range pods {
		c.pod(t, p)
	}
	src, v := c.xdsView(t, "a")
	web := c.fqdn("web")
	step := func(what string, want ...string) {
		t.Helper()
		v.waitFor(t, 20*time.Second, what, func(v *view) bool { return slices.Equal(v.healthy(web), want) })
	}
	step("web's two endpoints", "100.64.1.1:8080", "100.64.1.2:8080")

	pods[1].ready = false
	c.setReady(t, pods[1])
	step("w2 not ready", "100.64.1.1:8080")
	if sp, _ := v.spec(web); len(sp.Endpoints) != 2 {
		t.Errorf("an unready pod is an unhealthy endpoint (status UNHEALTHY): %d endpoints", len(sp.Endpoints))
	}
	c.deletePod(t, "w1")
	step("w1 deleted")
	c.pod(t, realPod{name: "w3", node: "c", ip: "100.64.1.3", app: "web", ready: true})
	step("w3 added in r2/z3", "100.64.1.3:8080")
	c.deleteService(t, "other")
	v.waitFor(t, 20*time.Second, "other removed", func(v *view) bool { return v.endpointCount(c.fqdn("other")) == -1 })

	c.istiod.Kill()
	within(t, 10*time.Second, "the source reports istiod down", func() bool { return src.Health() != nil })
	if got := v.healthy(web); !slices.Equal(got, []string{"100.64.1.3:8080"}) {
		t.Fatalf("istiod down: web %v, want its last tree", got)
	}
	c.pod(t, realPod{name: "w4", node: "a", ip: "100.64.1.4", app: "web", ready: true})
	c.deleteService(t, "gone")
	if err := c.istiod.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	step("w4, added while istiod was down", "100.64.1.3:8080", "100.64.1.4:8080")
	v.waitFor(t, 20*time.Second, "gone, deleted while istiod was down, removed", func(v *view) bool { return v.endpointCount(c.fqdn("gone")) == -1 })
	within(t, 10*time.Second, "the source reports istiod up", func() bool { return src.Health() == nil })
	if n := slices.Min(v.counts(web)); n < 1 {
		t.Errorf("web went without endpoints: counts %v", v.counts(web))
	}
	if got := src.stats.connects; got < 2 {
		t.Errorf("%d streams, want a reconnect", got)
	}
}

func (c *realCluster) deletePod(t testing.TB, name string) {
	t.Helper()
	if err := c.admin.CoreV1().Pods(c.ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
}

func (c *realCluster) deleteService(t testing.TB, name string) {
	t.Helper()
	if err := c.admin.CoreV1().Services(c.ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}
