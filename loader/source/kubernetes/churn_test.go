package kubernetes

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/loctree/loctree/shared"
)

// TestChurnConvergesToFreshBuild applies thousands of random endpoint, slice,
// node and annotation changes through the real informers and checks that the
// source ends on exactly the tree a fresh source builds from the final state.
func TestChurnConvergesToFreshBuild(t *testing.T) {
	ops := 2000
	if testing.Short() {
		ops = 500
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var svcs []*corev1.Service
	var sls []*discoveryv1.EndpointSlice
	tds := []string{"PreferClose", "PreferSameNode", "PreferSameZone", "PreferClose", "PreferClose"}
	for i, td := range tds {
		svc := service("churn", fmt.Sprintf("s%d", i), td, []string{fmt.Sprintf("127.77.1.%d", i+1)}, 80, 8080)
		svcs = append(svcs, svc)
		for j := range 3 {
			sls = append(sls, slice("churn", svc.Name, fmt.Sprintf("s%d-%d", i, j), discoveryv1.AddressTypeIPv4, nil, 1080, 9080))
		}
	}
	var nodes []*corev1.Node
	for i := range 6 {
		nodes = append(nodes, node(fmt.Sprintf("n%d", i), zoneLabels("r"+fmt.Sprint(i%2), fmt.Sprintf("z%d", i%3), "", "net1")))
	}
	client := newClient(objects(svcs, sls, nodes)...)
	c := run(t, client, "n0")
	c.waitFor(t, 0, "first update", func(Update) bool { return true })

	start := time.Now()
	addr := 0
	for range ops {
		switch op := rng.IntN(100); {
		case op < 85:
			sl := sls[rng.IntN(len(sls))]
			mutateSlice(rng, sl, nodes, &addr)
			must(t)(client.DiscoveryV1().EndpointSlices("churn").Update(ctx, sl.DeepCopy(), metav1.UpdateOptions{}))
		case op < 93:
			n := nodes[rng.IntN(len(nodes))]
			n.Labels[LabelZone] = fmt.Sprintf("z%d", rng.IntN(4))
			must(t)(client.CoreV1().Nodes().Update(ctx, n.DeepCopy(), metav1.UpdateOptions{}))
		default:
			svc := svcs[rng.IntN(len(svcs))]
			mutateService(rng, svc)
			must(t)(client.CoreV1().Services("churn").Update(ctx, svc.DeepCopy(), metav1.UpdateOptions{}))
		}
	}
	for _, svc := range svcs { // end on good annotations: a bad one keeps history-dependent settings
		svc.Annotations[AnnotationScopes] = "region,zone"
		must(t)(client.CoreV1().Services("churn").Update(ctx, svc.DeepCopy(), metav1.UpdateOptions{}))
	}
	applied := time.Since(start)

	fresh := run(t, newClient(objects(svcs, sls, nodes)...), "n0")
	want := fresh.waitFor(t, 0, "fresh build", func(Update) bool { return true })
	wantTree := mustBuild(t, want.Topology).Bytes()
	got := c.waitFor(t, 0, "churned source to converge", func(u Update) bool {
		tree, err := shared.Build(u.Topology, shared.BuildOptions{Generation: 1})
		return err == nil && bytes.Equal(tree.Bytes(), wantTree)
	})
	if !reflect.DeepEqual(got.Topology, want.Topology) || !reflect.DeepEqual(got.Locality, want.Locality) {
		t.Error("same tree bytes but different topology or own locality")
	}
	var eps int
	for _, s := range want.Topology.Services {
		eps += len(s.Endpoints)
	}
	t.Logf("%d changes applied in %v, converged after %v; %d updates published; final: %d tree services, %d endpoints",
		ops, applied, time.Since(start), c.count(), len(want.Topology.Services), eps)
}

func mutateSlice(rng *rand.Rand, sl *discoveryv1.EndpointSlice, nodes []*corev1.Node, addr *int) {
	eps := sl.Endpoints
	switch op := rng.IntN(10); {
	case op < 4 || len(eps) == 0:
		*addr++
		eps = append(eps, discoveryv1.Endpoint{
			Addresses: []string{fmt.Sprintf("127.1.%d.%d", *addr/250, *addr%250+1)},
			NodeName:  ptr.To(nodes[rng.IntN(len(nodes))].Name),
			Zone:      ptr.To(fmt.Sprintf("z%d", rng.IntN(3))),
		})
	case op < 6:
		eps = append(eps[:0:0], append(eps[:rng.IntN(len(eps))], eps[rng.IntN(len(eps)):]...)...)
	case op < 8:
		e := &eps[rng.IntN(len(eps))]
		e.Conditions.Ready = ptr.To(rng.IntN(2) == 0)
		e.Conditions.Terminating = ptr.To(rng.IntN(4) == 0)
		e.Conditions.Serving = ptr.To(rng.IntN(2) == 0)
	default:
		eps[rng.IntN(len(eps))].NodeName = ptr.To(nodes[rng.IntN(len(nodes))].Name)
	}
	sl.Endpoints = eps
}

func mutateService(rng *rand.Rand, svc *corev1.Service) {
	scopes := []string{"region,zone", "zone,node", "network,region,zone,subzone", "region,zone,bad scope"}
	modes := []string{"failover", "strict"}
	svc.Annotations = map[string]string{
		AnnotationScopes: scopes[rng.IntN(len(scopes))],
		AnnotationMode:   modes[rng.IntN(len(modes))],
	}
}

func objects(svcs []*corev1.Service, sls []*discoveryv1.EndpointSlice, nodes []*corev1.Node) []runtime.Object {
	var out []runtime.Object
	for _, s := range svcs {
		out = append(out, s.DeepCopy())
	}
	for _, s := range sls {
		out = append(out, s.DeepCopy())
	}
	for _, n := range nodes {
		out = append(out, n.DeepCopy())
	}
	return out
}
