package kubernetes

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/utils/ptr"

	"github.com/loctree/loctree/shared"
)

// randomWorld is one random cluster: nodes, Services with endpoints and
// traffic distributions, DestinationRules and a mesh default, in the
// oracle's terms.
type randomWorld struct {
	nodes    []*corev1.Node
	services []randomService
	rules    []*oDR
	mesh     *oLB
}

type randomService struct {
	ns            string
	spec          *string
	svcAnn, nsAnn map[string]string
	endpoints     []randomEndpoint
}

type randomEndpoint struct {
	node  int
	ready bool
}

const rootNs = "istio-system"

var (
	regions   = []string{"r1", "r2", "r3"}
	zones     = []string{"z1", "z2"}
	subzones  = []string{"s1", "s2"}
	topoLabel = []string{LabelNetwork, LabelRegion, LabelZone, LabelSubzone, "kubernetes.io/hostname", "topology.istio.io/cluster"}
)

func newRandomWorld(rng *rand.Rand, nServices int) *randomWorld {
	w := &randomWorld{mesh: randomLB(rng, true)}
	for i := range 6 {
		w.nodes = append(w.nodes, node(fmt.Sprintf("n%d", i), zoneLabels(pick(rng, regions), pick(rng, zones), pick(rng, subzones), "net1")))
	}
	for i := range nServices {
		ns := fmt.Sprintf("ns%d", i)
		s := randomService{ns: ns, svcAnn: map[string]string{AnnotationEnabled: "true"}}
		switch rng.IntN(6) {
		case 0:
			s.spec = ptr.To(pick(rng, []string{"PreferClose", "PreferSameZone", "PreferSameNode"}))
		case 1:
			s.svcAnn[AnnotationTrafficDistribution] = pick(rng, []string{"preferclose", "PreferSameNode"})
		case 2:
			s.nsAnn = map[string]string{AnnotationTrafficDistribution: pick(rng, []string{"PreferSameZone", "PREFERSAMENODE"})}
		}
		for range 1 + rng.IntN(8) {
			s.endpoints = append(s.endpoints, randomEndpoint{node: rng.IntN(len(w.nodes)), ready: rng.IntN(4) != 0})
		}
		w.services = append(w.services, s)
		for j := range rng.IntN(4) {
			w.rules = append(w.rules, randomRule(rng, ns, fmt.Sprintf("dr%d", j), nServices))
		}
	}
	for j := range rng.IntN(3) {
		w.rules = append(w.rules, randomRule(rng, rootNs, fmt.Sprintf("root%d", j), nServices))
	}
	return w
}

func pick[T any](rng *rand.Rand, s []T) T { return s[rng.IntN(len(s))] }

// svcName is the name of the Service in namespace ns<i>: Services of the
// same name in two namespaces would share short host names, which one tree
// refuses.
func svcName(ns string) string { return "svc" + ns[2:] }

func randomRule(rng *rand.Rand, ns, name string, nServices int) *oDR {
	other := fmt.Sprintf("ns%d", rng.IntN(nServices))
	own := svcName(ns)
	if ns == rootNs {
		own = svcName(other)
	}
	dr := &oDR{ns: ns, name: name, created: int64(rng.IntN(3)),
		host: pick(rng, []string{own, own, own + "." + ns + ".svc.cluster.local", "*." + ns + ".svc.cluster.local",
			"*.svc.cluster.local", "*", "*.cluster.local", "other", svcName(other) + "." + other + ".svc.cluster.local", "*." + other + ".svc.cluster.local"}),
		exportTo: pick(rng, [][]string{nil, nil, {"*"}, {"."}, {ns}, {other}, {other, ns}, {fmt.Sprintf("ns%d", rng.IntN(nServices))}}),
		selector: rng.IntN(10) == 0,
	}
	if rng.IntN(8) != 0 {
		dr.policy = randomPolicy(rng, true)
	}
	return dr
}

func randomPolicy(rng *rand.Rand, ports bool) *oPolicy {
	p := &oPolicy{lbSet: rng.IntN(4) != 0, od: rng.IntN(4) != 0}
	if p.lbSet && rng.IntN(5) != 0 {
		p.lb = randomLB(rng, false)
	}
	if p.od {
		p.minHealth = pick(rng, []int32{0, 0, 30, 60, 100, -1})
	}
	if ports && rng.IntN(3) == 0 {
		p.ports = map[uint32]*oPolicy{uint32(80 + rng.IntN(2)): randomPolicy(rng, false)}
	}
	return p
}

// randomLB is a localityLbSetting the tree can honour: no distribute, and
// failover together with failoverPriority only for one label that is not
// a locality label and has no value.
func randomLB(rng *rand.Rand, mesh bool) *oLB {
	l := &oLB{}
	if rng.IntN(3) == 0 {
		l.enabled = ptr.To(rng.IntN(4) != 0)
	}
	if mesh && rng.IntN(2) == 0 {
		return l
	}
	if rng.IntN(2) == 0 {
		if rng.IntN(3) == 0 { // Istio's failoverPriority rank × 5 + LbPriority
			l.failoverPriority = []string{pick(rng, []string{LabelNetwork, "topology.istio.io/cluster", "kubernetes.io/hostname"})}
		}
		for _, from := range []string{"r1", "r2", "r3", "r4"} {
			if rng.IntN(2) == 0 {
				to := pick(rng, regions)
				if to != from {
					l.failover = append(l.failover, [2]string{from, to})
				}
				if to2 := pick(rng, regions); to2 != from && rng.IntN(4) == 0 {
					l.failover = append(l.failover, [2]string{from, to2}) // a second rule of one region: the first wins
				}
			}
		}
		return l
	}
	labels := slices.Clone(topoLabel)
	rng.Shuffle(len(labels), func(i, j int) { labels[i], labels[j] = labels[j], labels[i] })
	for _, lab := range labels[:1+rng.IntN(4)] {
		if rng.IntN(4) == 0 && lab != "kubernetes.io/hostname" {
			lab += "=" + map[string]string{LabelNetwork: "net1", LabelRegion: pick(rng, regions), LabelZone: pick(rng, zones),
				LabelSubzone: pick(rng, subzones), "topology.istio.io/cluster": "c1"}[lab]
		}
		l.failoverPriority = append(l.failoverPriority, lab)
	}
	return l
}

// objects are the cluster's API objects.
func (w *randomWorld) objects() (core, istio []runtime.Object) {
	for _, n := range w.nodes {
		core = append(core, n)
	}
	seen := map[string]bool{}
	for i, s := range w.services {
		if !seen[s.ns] {
			seen[s.ns] = true
			core = append(core, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.ns, Annotations: s.nsAnn}})
		}
		svc := service(s.ns, svcName(s.ns), "", []string{fmt.Sprintf("127.77.%d.1", i)}, 80, 81)
		svc.Spec.TrafficDistribution = s.spec
		svc.Annotations = s.svcAnn
		var eps []ep
		for j, e := range s.endpoints {
			eps = append(eps, ep{addr: fmt.Sprintf("127.1.%d.%d", i, j+1), node: fmt.Sprintf("n%d", e.node), ready: ptr.To(e.ready)})
		}
		core = append(core, svc, slice(s.ns, svcName(s.ns), "slice-1", discoveryv1.AddressTypeIPv4, eps, 1080, 1081))
	}
	for _, r := range w.rules {
		istio = append(istio, drObject(r))
	}
	return core, istio
}

func (w *randomWorld) meshConfig(t testing.TB) Mesh {
	raw, _ := json.Marshal(map[string]any{"localityLbSetting": lbObject(w.mesh)})
	if w.mesh.enabled == nil && len(w.mesh.failover)+len(w.mesh.failoverPriority) == 0 && w.mesh.distribute == false {
		raw = []byte("{}") // no localityLbSetting: Istio's default
	}
	m, err := ParseMeshConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// oMesh is the mesh default the oracle sees: Istio's default when unset.
func (w *randomWorld) oMesh() *oLB {
	if w.mesh.enabled == nil && len(w.mesh.failover)+len(w.mesh.failoverPriority) == 0 {
		return &oLB{enabled: ptr.To(true)}
	}
	return w.mesh
}

func (w *randomWorld) oEndpoint(n *corev1.Node) oEndpoint {
	l := n.Labels
	return oEndpoint{region: l[LabelRegion], zone: l[LabelZone], subzone: l[LabelSubzone], labels: map[string]string{
		LabelRegion: l[LabelRegion], LabelZone: l[LabelZone], LabelSubzone: l[LabelSubzone], LabelNetwork: l[LabelNetwork],
		"kubernetes.io/hostname": n.Name, "topology.istio.io/cluster": "c1",
	}}
}

// sources are the nodes plus one node in a region without endpoints.
func (w *randomWorld) sources() []*corev1.Node {
	return append(slices.Clone(w.nodes), node("far", zoneLabels("r4", "z1", "s1", "net1")))
}

// istioCounts is what Istio gives a proxy on src for port of service i:
// the healthy and total endpoints of each priority, or false when the
// agent does not claim Istio's sidecar semantics there (no rule applies,
// or the Service's traffic distribution decides, which the agent maps as
// ambient does).
func (w *randomWorld) istioCounts(i int, port uint32, src *corev1.Node) ([]shared.PriorityCounts, bool, float64) {
	s := w.services[i]
	td := oGetTrafficDistribution(s.spec, s.svcAnn, s.nsAnn)
	drs := oDestinationRule(w.rules, s.ns, svcName(s.ns)+"."+s.ns+".svc.cluster.local", s.ns, rootNs)
	if len(drs) == 0 {
		return nil, false, 0
	}
	pp := oPortPolicy(oTopPolicy(drs), port)
	if td != 0 && (pp == nil || !pp.lbSet || pp.lb == nil) {
		return nil, false, 0
	}
	set, force := oEffective(w.oMesh(), pp, td)
	enable := force || (pp != nil && pp.od)
	// supportsUnhealthyEndpoints, pilot/pkg/xds/endpoints/endpoint_builder.go:232-247,
	// with PILOT_AUTO_SEND_UNHEALTHY_ENDPOINTS (features/experimental.go:45) on.
	sendUnready := td != 0 || pp == nil || !pp.od || pp.minHealth <= 0
	var eps []oEndpoint
	var ready []bool
	for _, e := range s.endpoints {
		if e.ready || sendUnready {
			eps = append(eps, w.oEndpoint(w.nodes[e.node]))
			ready = append(ready, e.ready)
		}
	}
	prio := oPriorities(set, enable, w.oEndpoint(src), eps)
	var out []shared.PriorityCounts
	for k, p := range prio {
		for len(out) <= p {
			out = append(out, shared.PriorityCounts{})
		}
		out[p].Total++
		if ready[k] {
			out[p].Healthy++
		}
	}
	return out, true, oPanicThreshold(pp, td)
}

// TestRandomRulesMatchIstio: random DestinationRules (hosts, exportTo,
// root namespace, port levels, outlier detection, failover,
// failoverPriority with label=value, enabled), traffic distributions (spec,
// Service and Namespace annotations) and mesh defaults through the fake
// API into the agent's tree; for every Service port and every source the
// priorities of the tree's loads (shared.Service.Loads) hold the endpoints
// Istio's transcribed functions put in each Envoy priority
// (istio_oracle_test.go), and the panic threshold is Istio's.
func TestRandomRulesMatchIstio(t *testing.T) {
	rounds, nServices := 12, 16
	if testing.Short() {
		rounds = 3
	}
	compared, kinds := 0, map[string]int{}
	for round := range rounds {
		rng := rand.New(rand.NewPCG(uint64(round), 12))
		w := newRandomWorld(rng, nServices)
		core, rules := w.objects()
		late := round%2 == 1 // the rules come after the first update, each first written for another host
		var istio *dynamicfake.FakeDynamicClient
		if late {
			istio = newIstio()
		} else {
			istio = newIstio(rules...)
		}
		c := runIstio(t, newClient(core...), istio, w.meshConfig(t))
		u := c.waitFor(t, 0, "every service", func(u Update) bool { return len(u.Topology.Services) == 2*nServices })
		if late {
			w.applyLate(t, rng, c, istio, rules)
			u = settle(t, c)
			fresh := runIstio(t, newClient(core...), newIstio(rules...), w.meshConfig(t))
			f := fresh.waitFor(t, 0, "every service, fresh", func(u Update) bool { return len(u.Topology.Services) == 2*nServices })
			if !reflect.DeepEqual(u.Topology.Services, f.Topology.Services) {
				t.Errorf("round %d: the rules applied one by one left another tree than a fresh start with them", round)
			}
		}
		tree, err := shared.Build(u.Topology, shared.BuildOptions{Generation: 1})
		if err != nil {
			t.Fatalf("round %d: build: %v", round, err)
		}
		compared += w.compare(t, round, u, tree, kinds)
	}
	if compared < rounds*nServices/2 {
		t.Errorf("only %d service ports compared", compared)
	}
	t.Logf("%d service ports × 7 sources compared: %v", compared, kinds)
	for _, k := range []string{"locality off", "failover", "failover rules", "failoverPriority", "failoverPriority label=value", "failoverPriority with failover rules", "panic threshold set", "unready left out"} {
		if kinds[k] == 0 {
			t.Errorf("no case of %s", k)
		}
	}
}

func (w *randomWorld) compare(t *testing.T, round int, u Update, tree *shared.Tree, kinds map[string]int) int {
	t.Helper()
	n := 0
	for i, s := range w.services {
		for _, port := range []uint32{80, 81} {
			name := svcName(s.ns) + "." + s.ns + ".svc.cluster.local"
			if port == 81 {
				name += ":81"
			}
			svc, ok := tree.Service(name)
			spec, _ := findService(u, name)
			if !ok {
				t.Fatalf("round %d: no tree service %s", round, name)
			}
			compared := false
			for _, src := range w.sources() {
				want, ok, panicAt := w.istioCounts(i, port, src)
				if !ok {
					break
				}
				compared = true
				got := treeCounts(svc, spec, NodeLocality(src, "c1"))
				if !slices.Equal(got, want) {
					t.Errorf("round %d, %s from %s (%v): tree priorities %v, Istio %v\n  rules %v\n  spec scopes %v failover %v spillover %v locality_lb %v",
						round, name, src.Name, src.Labels, got, want, w.rulesOf(s.ns), spec.Scopes, spec.Failover, spec.Spillover, spec.LocalityLB)
				}
				if spec.Spillover != nil && !samePanic(spec.Spillover.PanicThreshold, panicAt) {
					t.Errorf("round %d, %s: panic threshold %v, Istio %v", round, name, spec.Spillover.PanicThreshold, panicAt)
				}
			}
			if compared {
				n++
				kinds[specKind(spec)]++
				if spec.Spillover != nil && spec.Spillover.PanicThreshold != nil && *spec.Spillover.PanicThreshold > 0 {
					kinds["panic threshold set"]++
				}
				if len(spec.Endpoints) < len(s.endpoints) {
					kinds["unready left out"]++
				}
			}
		}
	}
	return n
}

// treeCounts are the tree's priorities for src. A service without
// spillover has one priority: its candidates (healthy) among all the
// endpoints it has (what Istio sends).
func treeCounts(svc *shared.Service, spec shared.ServiceSpec, src shared.Locality) []shared.PriorityCounts {
	l := svc.Loads(src)
	if spec.Spillover == nil {
		one := shared.PriorityCounts{Total: uint32(len(spec.Endpoints))}
		if one.Total == 0 {
			return nil
		}
		if l.N == 1 {
			one.Healthy = l.Counts[0].Healthy
		}
		return []shared.PriorityCounts{one}
	}
	out := make([]shared.PriorityCounts, l.N)
	for p := range l.N {
		out[p] = l.Counts[p]
	}
	return out
}

// specKind says which mapping a tree service exercises.
func specKind(s shared.ServiceSpec) string {
	switch {
	case s.LocalityLB != nil:
		return "locality off"
	case len(s.Failover) > 0 && !slices.Equal(s.Scopes, localityScopes):
		return "failoverPriority with failover rules"
	case len(s.Failover) > 0:
		return "failover rules"
	case slices.ContainsFunc(s.Scopes, func(sc string) bool { return strings.Contains(sc, "=") }):
		return "failoverPriority label=value"
	case s.Spillover != nil && !slices.Equal(s.Scopes, localityScopes):
		return "failoverPriority"
	case s.Spillover != nil:
		return "failover"
	}
	return "other"
}

func samePanic(got *uint32, want float64) bool {
	if got == nil {
		return want < 0
	}
	return float64(*got) == want
}

func (w *randomWorld) rulesOf(ns string) []string {
	var out []string
	for _, r := range w.rules {
		if r.ns == ns || r.ns == rootNs {
			b, _ := json.Marshal(drObject(r).Object["spec"])
			out = append(out, fmt.Sprintf("%s/%s(created %d): %s", r.ns, r.name, r.created, b))
		}
	}
	return out
}

// applyLate creates the rules through the API, each first with the host of
// another Service (or a wildcard), lets the source publish them, then
// writes each with its own host: the source must follow a rule moving
// between hosts, out of the first and into the second.
func (w *randomWorld) applyLate(t *testing.T, rng *rand.Rand, c *collector, istio *dynamicfake.FakeDynamicClient, rules []runtime.Object) {
	for _, obj := range rules {
		first := obj.(*unstructured.Unstructured).DeepCopy()
		other := pick(rng, w.services).ns
		first.Object["spec"].(map[string]any)["host"] = pick(rng, []string{svcName(other), "*." + other + ".svc.cluster.local", "*"})
		if _, err := istio.Resource(DestinationRuleResource).Namespace(first.GetNamespace()).Create(ctx, first, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	settle(t, c)
	for _, obj := range rules {
		final := obj.(*unstructured.Unstructured)
		if _, err := istio.Resource(DestinationRuleResource).Namespace(final.GetNamespace()).Update(ctx, final, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// settle waits until the source has published nothing for 300 ms and
// returns its last update.
func settle(t *testing.T, c *collector) Update {
	t.Helper()
	n := c.count()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		time.Sleep(300 * time.Millisecond)
		if m := c.count(); m == n {
			ups := c.since(0)
			return ups[len(ups)-1]
		} else {
			n = m
		}
	}
	t.Fatal("the source did not settle")
	return Update{}
}
