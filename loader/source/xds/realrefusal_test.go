package xds

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/loctree/loctree/internal/testing/realcp"
	"github.com/loctree/loctree/internal/testing/syncbuf"
)

// TestRealRefusal: what a real istiod serves that the tree cannot hold is
// refused per service, logged once and counted, and the rest applied: a
// ServiceEntry whose endpoint becomes a DNS name (resolution DNS: WDS
// gives the workload a hostname, which ztunnel resolves) keeps its last
// tree service; a ServiceEntry whose address is a CIDR range (WDS
// NetworkAddress.length) never enters the tree; a Service beside them is
// applied. No WDS resource is NACKed: they all decode.
func TestRealRefusal(t *testing.T) {
	c := onRealIstiod(t)
	realcp.ApplyIstioCRDs(t, c.cp, "serviceentries.networking.istio.io")
	c.node(t, "a", "r1", "z1", "")
	c.service(t, realSvc{name: "web", td: "PreferSameZone"})
	c.pod(t, realPod{name: "w1", node: "a", ip: "100.64.1.1", app: "web", ready: true})
	dnsHost, rangeHost := "dns."+c.ns+".example", "range."+c.ns+".example"
	c.serviceEntry(t, "dns", dnsHost, "240.0.0.1", "STATIC", "100.64.8.1")
	logs := &syncbuf.Buffer{}
	src, err := New(Config{Address: c.istiod.XDSAddress(), NodeName: c.nodeName("a"), Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	v := runView(t, src)
	v.waitFor(t, 20*time.Second, "web and the static ServiceEntry", converged(map[string]int{c.fqdn("web"): 1, dnsHost: 1}))

	c.serviceEntry(t, "range", rangeHost, "240.0.1.0/24", "STATIC", "100.64.8.2")
	c.serviceEntry(t, "dns", dnsHost, "240.0.0.1", "DNS", "backend."+c.ns+".example")
	within(t, 20*time.Second, "both ServiceEntries refused", func() bool { return strings.Count(logs.String(), "service refused") == 2 })
	c.pod(t, realPod{name: "w2", node: "a", ip: "100.64.1.2", app: "web", ready: true})
	v.waitFor(t, 20*time.Second, "web's new pod, applied beside the refusals", converged(map[string]int{c.fqdn("web"): 2}))
	sp, ok := v.spec(dnsHost)
	if !ok || len(sp.Endpoints) != 1 || sp.Endpoints[0].Address != "100.64.8.1:80" {
		t.Errorf("the refused ServiceEntry keeps its last tree service: %+v", sp)
	}
	if _, ok := v.spec(rangeHost); ok {
		t.Errorf("a CIDR VIP entered the tree")
	}
	c.serviceEntry(t, "dns", dnsHost, "240.0.0.2", "DNS", "backend."+c.ns+".example") // a new VIP: refused again, for the same reason
	within(t, 20*time.Second, "the new VIP received", func() bool {
		src.st.mu.Lock()
		defer src.st.mu.Unlock()
		s := src.st.services[c.ns+"/"+dnsHost]
		return s != nil && len(s.vips) == 1 && s.vips[0].String() == "240.0.0.2"
	})
	time.Sleep(100 * time.Millisecond) // Run maps it after the client stored it
	if n := strings.Count(logs.String(), "service refused"); n != 2 {
		t.Errorf("%d refusal logs, want each service's logged once:\n%s", n, logs.String())
	}
	for _, want := range []string{"has a DNS name (backend." + c.ns + ".example) and no address", "its VIP 240.0.1.0/24 is a range"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log does not say %q:\n%s", want, logs.String())
		}
	}
	var m bytes.Buffer
	if err := src.WriteMetrics(&m); err != nil || !strings.Contains(m.String(), "loctree_xds_services_unmappable 2\n") || !strings.Contains(m.String(), "loctree_xds_nacks_total 0\n") {
		t.Errorf("metrics (%v):\n%s", err, m.String())
	}
}

// serviceEntry creates or replaces a ServiceEntry with one port (80 → 80),
// one address and one endpoint, that asks for PreferClose.
func (c *realCluster) serviceEntry(t testing.TB, name, host, addr, resolution, endpoint string) {
	t.Helper()
	gvr := schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "serviceentries"}
	res := dynamic.NewForConfigOrDie(c.cp.Admin()).Resource(gvr).Namespace(c.ns)
	se := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "networking.istio.io/v1", "kind": "ServiceEntry",
		"metadata": map[string]any{"name": name, "annotations": map[string]any{"networking.istio.io/traffic-distribution": "PreferClose"}},
		"spec": map[string]any{
			"hosts": []any{host}, "addresses": []any{addr}, "resolution": resolution, "location": "MESH_INTERNAL",
			"ports":     []any{map[string]any{"number": int64(80), "name": "tcp", "protocol": "TCP"}},
			"endpoints": []any{map[string]any{"address": endpoint, "locality": "r1/z1"}},
		},
	}}
	ctx := context.Background()
	if old, err := res.Get(ctx, name, metav1.GetOptions{}); err == nil {
		se.SetResourceVersion(old.GetResourceVersion())
		_, err = res.Update(ctx, se, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	if _, err := res.Create(ctx, se, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
