package xds

import (
	"fmt"
	"io"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loctree/loctree/loader/source/kubernetes"
	"github.com/loctree/loctree/shared"
)

// scenario is a cluster state of every form of Service istiod gives
// load-balancing scopes: trafficDistribution PreferClose (with a pod not
// ready), PreferSameZone, PreferSameNode, internalTrafficPolicy Local
// (with a traffic distribution, and without: istiod's own),
// publishNotReadyAddresses, a dual-stack Service with two ports, Istio's
// traffic-distribution annotation, and a Service with neither.
type scenario struct {
	svcs []realSvc
	pods map[string][]realPod // by Service
}

func dual(p realPod, ip6 string) realPod {
	p.ip6 = ip6
	return p
}

func newScenario() scenario {
	ep := func(svc, name, node, ip string, ready bool) realPod {
		return realPod{name: name, node: node, ip: ip, app: svc, ready: ready}
	}
	return scenario{
		svcs: []realSvc{
			{name: "close", td: "PreferClose"}, {name: "zone", td: "PreferSameZone"}, {name: "node", td: "PreferSameNode"},
			{name: "local", td: "PreferSameZone", local: true}, {name: "pnr", td: "PreferSameZone", notReady: true},
			{name: "plain"}, {name: "localonly", local: true}, {name: "dual", td: "PreferSameZone", dual: true},
			{name: "annotated", annotation: "PreferSameNode"},
		},
		pods: map[string][]realPod{
			"close": {ep("close", "c1", "a", "100.64.1.1", true), ep("close", "c2", "b", "100.64.1.2", true),
				ep("close", "c3", "c", "100.64.1.3", true), ep("close", "c4", "a", "100.64.1.4", false)},
			"zone":      {ep("zone", "z1", "a", "100.64.2.1", true), ep("zone", "z2", "b", "100.64.2.2", true)},
			"node":      {ep("node", "n1", "a", "100.64.3.1", true), ep("node", "n2", "c", "100.64.3.2", true)},
			"local":     {ep("local", "l1", "a", "100.64.4.1", true), ep("local", "l2", "b", "100.64.4.2", true)},
			"pnr":       {ep("pnr", "p1", "a", "100.64.5.1", false), ep("pnr", "p2", "c", "100.64.5.2", true)},
			"plain":     {ep("plain", "q1", "a", "100.64.6.1", true)},
			"localonly": {ep("localonly", "o1", "a", "100.64.7.1", true), ep("localonly", "o2", "b", "100.64.7.2", true)},
			"annotated": {ep("annotated", "t1", "a", "100.64.9.1", true), ep("annotated", "t2", "b", "100.64.9.2", true)},
			"dual":      {dual(ep("dual", "d1", "a", "100.64.8.1", true), "2001:db8::8:1"), dual(ep("dual", "d2", "c", "100.64.8.2", true), "2001:db8::8:2")},
		},
	}
}

// nodes are the scenario's nodes: two zones of r1 (a with a subzone) and r2.
var scenarioNodes = []struct{ name, region, zone, subzone string }{
	{"a", "r1", "z1", "s1"}, {"b", "r1", "z2", ""}, {"c", "r2", "z3", ""},
}

func (c *realCluster) create(t testing.TB, sc scenario) {
	t.Helper()
	for _, n := range scenarioNodes {
		c.node(t, n.name, n.region, n.zone, n.subzone)
	}
	for _, s := range sc.svcs {
		c.service(t, s)
		for _, p := range sc.pods[s.name] {
			c.pod(t, p)
		}
		c.slice(t, s.name, sc.pods[s.name])
	}
}

// localities are the source localities compared: every node's, as both
// sources give them, and one of a region no endpoint is in.
func (c *realCluster) localities() []shared.Locality {
	var out []shared.Locality
	for _, n := range scenarioNodes {
		loc := shared.Locality{"region": n.region, "zone": n.zone, "node": c.nodeName(n.name), "cluster": "Kubernetes"}
		if n.subzone != "" {
			loc["subzone"] = n.subzone
		}
		out = append(out, loc)
	}
	return append(out, shared.Locality{"region": "r9", "zone": "z9", "node": "elsewhere", "cluster": "Kubernetes"})
}

func (c *realCluster) kubernetesView(t testing.TB) *view {
	t.Helper()
	client, err := kubernetes.NewClient(c.kubeconfig(t))
	if err != nil {
		t.Fatal(err)
	}
	src, err := kubernetes.New(kubernetes.Config{Client: client, NodeName: c.nodeName("a"), ClusterID: "Kubernetes",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return runView(t, src)
}

func (c *realCluster) xdsView(t testing.TB, node string) (*Source, *view) {
	t.Helper()
	src, err := New(Config{Address: c.istiod.XDSAddress(), NodeName: c.nodeName(node), Namespace: "loctree", PodName: "agent",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return src, runView(t, src)
}

// converged says whether the view holds each named service with that many
// endpoints (-1: not at all).
func converged(want map[string]int) func(v *view) bool {
	return func(v *view) bool {
		for name, n := range want {
			if v.endpointCount(name) != n {
				return false
			}
		}
		return true
	}
}

// TestRealDifferentialKubernetes: for the same cluster state on a real API
// server, the tree the xDS source builds from a real istiod's WDS and the
// tree the Kubernetes source builds from the API give every node's
// locality the same candidates for every Service both manage, with the
// same scopes, mode and health policy and the same endpoints. Where they
// differ it is istiod's semantics, asserted as such: a Service with
// internalTrafficPolicy Local and no traffic distribution is managed by
// istiod ([node] strict, services.go constructService) and left alone by
// the Kubernetes source (opt-in: docs/ISTIO.md).
func TestRealDifferentialKubernetes(t *testing.T) {
	c := onRealIstiod(t)
	sc := newScenario()
	c.create(t, sc)
	want := c.treeNames(sc)
	want[c.fqdn("plain")] = -1
	kubeWant := maps.Clone(want)
	kubeWant[c.fqdn("localonly")] = -1
	_, xv := c.xdsView(t, "a")
	kv := c.kubernetesView(t)
	xv.waitFor(t, 30*time.Second, "the xDS source's services", converged(want))
	kv.waitFor(t, 30*time.Second, "the Kubernetes source's services", converged(kubeWant))

	names := map[string]bool{}
	for _, n := range append(xv.names(), kv.names()...) {
		if strings.Contains(n, "."+c.ns+".svc.") {
			names[n] = true
		}
	}
	if len(names) != len(want)-1 {
		t.Errorf("tree services %v, want %d (the dual-stack, two-port Service's four included)", slices.Sorted(maps.Keys(names)), len(want)-1)
	}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		xs, xok := xv.spec(name)
		ks, kok := kv.spec(name)
		if !xok || !kok {
			if !xok || name != c.fqdn("localonly") {
				t.Errorf("%s: in the xDS tree %v, in the Kubernetes tree %v", name, xok, kok)
			}
			continue
		}
		if !reflect.DeepEqual(xs.Scopes, ks.Scopes) || xs.Mode != ks.Mode || orDefault(xs.Health, "only_healthy") != orDefault(ks.Health, "only_healthy") || xs.VIP != ks.VIP {
			t.Errorf("%s: xds scopes %v mode %q health %q VIP %s, kubernetes %v %q %q %s", name, xs.Scopes, xs.Mode, xs.Health, xs.VIP, ks.Scopes, ks.Mode, ks.Health, ks.VIP)
		}
		if x, k := routed(xs), routed(ks); !slices.Equal(x, k) {
			t.Errorf("%s endpoints:\n xds        %v\n kubernetes %v", name, x, k)
		}
		for _, loc := range c.localities() {
			if x, k := candidates(t, xs, loc), candidates(t, ks, loc); !slices.Equal(x, k) {
				t.Errorf("%s from %v: xds candidates %v, kubernetes %v", name, loc, x, k)
			}
		}
	}
	if loc := xv.locality; fmt.Sprint(loc) != fmt.Sprint(c.localities()[0]) {
		t.Errorf("the xDS source's node locality %v, want node a's %v", loc, c.localities()[0])
	}
	lo, _ := xv.spec(c.fqdn("localonly"))
	if !slices.Equal(lo.Scopes, []string{"node"}) || lo.Mode != "strict" {
		t.Errorf("localonly: scopes %v mode %q, want istiod's [node] strict", lo.Scopes, lo.Mode)
	}
}

// treeNames are the tree services of the scenario's Services with their
// endpoint counts: the dual-stack Service has a second port and an IPv6
// twin of each.
func (c *realCluster) treeNames(sc scenario) map[string]int {
	want := map[string]int{}
	for _, s := range sc.svcs {
		n := len(sc.pods[s.name])
		want[c.fqdn(s.name)] = n
		if s.dual {
			want[c.fqdn(s.name)+":81"], want[c.fqdn(s.name)+"#ipv6"], want[c.fqdn(s.name)+":81#ipv6"] = n, n, n
		}
	}
	return want
}

// routed are a service's endpoints as the tree routes on them: address,
// weight, health and the values of the service's scopes (the Kubernetes
// source keeps only those; the xDS source keeps every key WDS gives).
func routed(sp shared.ServiceSpec) []string {
	var out []string
	for _, ep := range sp.Endpoints {
		w, healthy := uint32(1), true
		if ep.Weight != nil {
			w = *ep.Weight
		}
		if ep.Healthy != nil {
			healthy = *ep.Healthy
		}
		var loc []string
		for _, sc := range sp.Scopes {
			loc = append(loc, sc+"="+ep.Locality[sc])
		}
		out = append(out, fmt.Sprintf("%s w%d healthy=%v %v", ep.Address, w, healthy, loc))
	}
	slices.Sort(out)
	return out
}
