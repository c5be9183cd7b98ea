package xds

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/loctree/loctree/internal/testing/realcp"

	"github.com/loctree/loctree/loader/source/xds/internal/workloadapi"
)

// ztunnelCandidates transcribes ztunnel's load_balance (istio/ztunnel
// src/state.rs at 62d826530e5c, lines 375-508) over WDS as received: the
// endpoints src may be given for svc's port, before choose_weighted picks
// one (which never picks capacity 0). Endpoints are first filtered as
// ztunnel's service store keeps them (src/state/service.rs
// should_include_endpoint: healthy, or any with health_policy ALLOW_ALL).
func ztunnelCandidates(src *workload, svc *service, svcPort uint32, v6 bool, members []*workload) []string {
	targetPort, ok := uint32(0), false
	for _, p := range svc.ports {
		if p.service == svcPort {
			targetPort, ok = p.target, true
			break
		}
	}
	if !ok {
		return nil // "Port doesn't exist on the service at all"
	}
	type ranked struct {
		rank int
		wl   *workload
	}
	var eps []ranked
	for _, wl := range members {
		if !wl.healthy && svc.lb.GetHealthPolicy() != workloadapi.LoadBalancing_ALLOW_ALL {
			continue
		}
		inNetwork := wl.network == src.network
		hasAddress := len(wl.addrs) > 0 || wl.hostname != ""
		if !hasAddress && (inNetwork || !wl.gateway) {
			continue
		}
		if _, has := wl.services[svc.key][svcPort]; targetPort == 0 && !has {
			continue
		}
		eps = append(eps, ranked{0, wl})
	}
	lb := svc.lb
	if lb != nil && lb.GetMode() != workloadapi.LoadBalancing_UNSPECIFIED_MODE {
		prefs := lb.GetRoutingPreference()
		networkPreferred := len(prefs) > 0 && prefs[0] == workloadapi.LoadBalancing_NETWORK
		var kept []ranked
		for _, e := range eps {
			rank, adjust := 0, 0
			for _, target := range prefs {
				var matches bool
				switch target {
				case workloadapi.LoadBalancing_REGION:
					matches = src.locality[0] == e.wl.locality[0]
				case workloadapi.LoadBalancing_ZONE:
					matches = src.locality[1] == e.wl.locality[1]
				case workloadapi.LoadBalancing_SUBZONE:
					matches = src.locality[2] == e.wl.locality[2]
				case workloadapi.LoadBalancing_NODE:
					matches = src.node == e.wl.node
				case workloadapi.LoadBalancing_CLUSTER:
					matches = src.cluster == e.wl.cluster
				case workloadapi.LoadBalancing_NETWORK:
					m := src.network == e.wl.network
					if networkPreferred {
						if !m {
							continue // try the other scopes
						}
						adjust = len(prefs) - 1
					}
					matches = m
				}
				if !matches {
					break
				}
				rank++
			}
			if lb.GetMode() == workloadapi.LoadBalancing_STRICT && rank != len(prefs) {
				continue
			}
			kept = append(kept, ranked{rank + adjust, e.wl})
		}
		top := -1
		for _, e := range kept {
			top = max(top, e.rank)
		}
		eps = nil
		for _, e := range kept {
			if e.rank == top {
				eps = append(eps, e)
			}
		}
	}
	var out []string
	for _, e := range eps {
		i := slices.IndexFunc(e.wl.addrs, func(a netip.Addr) bool { return a.Is6() == v6 })
		if e.wl.capacity == 0 || i < 0 {
			continue // never chosen; or no address of the VIP's family (the kernel cannot cross families)
		}
		port := e.wl.services[svc.key][svcPort]
		if port == 0 {
			port = targetPort
		}
		out = append(out, netip.AddrPortFrom(e.wl.addrs[i], uint16(port)).String())
	}
	slices.Sort(out)
	return out
}

// TestRealZtunnelRule: on a real istiod, with Pods on the default network
// and WorkloadEntries on network net2 (region r2, zone z3) selected by four
// of the Services, for every workload istiod serves as a source and every
// Service it gives scopes, on every port and IP family (a dual-stack
// Service with two ports: its tree services and #ipv6 twins), the
// candidates of the xDS source's tree for the source's locality are
// ztunnel's load_balance candidates over the same WDS resources — the
// network rule included: a net2 source of a Service with no net2 endpoint
// ranks the others by the remaining scopes.
func TestRealZtunnelRule(t *testing.T) {
	c := onRealIstiod(t)
	realcp.ApplyIstioCRDs(t, c.cp, "workloadentries.networking.istio.io")
	sc := newScenario()
	c.create(t, sc)
	entries := []string{"close", "zone", "local", "pnr"}
	for i, svc := range entries {
		c.workloadEntry(t, svc, fmt.Sprintf("100.64.9.%d", i+1), "net2", "r2/z3")
	}
	want := c.treeNames(sc)
	for _, s := range entries {
		want[c.fqdn(s)]++
	}
	want[c.fqdn("plain")] = -1
	src, v := c.xdsView(t, "a")
	v.waitFor(t, 30*time.Second, "the xDS source's services, WorkloadEntries included", converged(want))

	sources, svcs := c.wds(src, sc)
	if len(sources) != 23 || len(svcs) != 8 {
		t.Fatalf("%d source workloads (want 19 Pods and 4 WorkloadEntries), %d managed services (want 8)", len(sources), len(svcs))
	}
	checked := 0
	for _, s := range svcs {
		for i, p := range s.svc.ports {
			for _, v6 := range []bool{false, true} {
				name := s.svc.hostname
				if i > 0 {
					name += fmt.Sprintf(":%d", p.service)
				}
				if v6 {
					name += "#ipv6"
				}
				sp, ok := v.spec(name)
				if !ok {
					if v6 && len(s.svc.vips) == 2 || !v6 {
						t.Errorf("no tree service %s", name)
					}
					continue
				}
				for _, w := range sources {
					want := ztunnelCandidates(w, s.svc, p.service, v6, s.members)
					if got := candidates(t, sp, w.localityOf()); !slices.Equal(got, want) {
						t.Errorf("%s from %s %v: tree %v, ztunnel %v", name, w.uid, w.localityOf(), got, want)
					}
					checked++
				}
			}
		}
	}
	t.Logf("%d (service, source workload) pairs agree", checked)
}

// svcOf is a WDS service and the workloads that name it.
type svcOf struct {
	svc     *service
	members []*workload
}

// wds are the test namespace's WDS workloads and managed services as the
// source holds them.
func (c *realCluster) wds(src *Source, sc scenario) (sources []*workload, svcs []svcOf) {
	src.st.mu.Lock()
	defer src.st.mu.Unlock()
	for _, w := range src.st.workloads {
		if strings.Contains(w.uid, "/"+c.ns+"/") {
			sources = append(sources, w)
		}
	}
	for _, s := range sc.svcs {
		if in := src.st.input(c.ns+"/"+c.fqdn(s.name), ""); in != nil {
			svcs = append(svcs, svcOf{in.svc, in.workloads})
		}
	}
	return sources, svcs
}

// workloadEntry creates an Istio WorkloadEntry selected by Service svc.
func (c *realCluster) workloadEntry(t testing.TB, svc, addr, network, locality string) {
	t.Helper()
	we := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "networking.istio.io/v1", "kind": "WorkloadEntry",
		"metadata": map[string]any{"name": svc + "-we"},
		"spec":     map[string]any{"address": addr, "labels": map[string]any{"app": svc}, "network": network, "locality": locality},
	}}
	gvr := schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "workloadentries"}
	if _, err := dynamic.NewForConfigOrDie(c.cp.Admin()).Resource(gvr).Namespace(c.ns).Create(context.Background(), we, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
