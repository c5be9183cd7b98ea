package kubernetes

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/loader"
)

// TestAgentScaleRules: the real agent (loader.Run with this source) on
// 1,000 Services of 100 endpoints over 27 nodes, then random policy
// changes through the fake API: a DestinationRule created or deleted
// (failoverPriority [region] with outlier detection), or the Service's
// networking.istio.io/traffic-distribution annotation flipped between
// PreferClose and PreferSameNode. The latency from the API call to the new
// tree served (after it is in the kernel) is measured per kind, debounce
// included, and connects from this node (n0: r0, z0) to the Service's VIP
// land where the new policy says: region r0, zone z0, or node n0.
func TestAgentScaleRules(t *testing.T) {
	kerneltest.RequireRoot(t)
	services, changes, perSvc := 1000, 200, 100
	if raceEnabled {
		services, changes = 100, 20
	}
	var objs []runtime.Object
	for n := range 27 {
		objs = append(objs, node(fmt.Sprintf("n%d", n), zoneLabels(fmt.Sprintf("r%d", n%3), fmt.Sprintf("z%d", n%9), "", "net1")))
	}
	svcs := make([]*corev1.Service, services)
	for s := range services {
		svcs[s] = service("default", scaleName(s), "", []string{scaleVIP(s)}, 80)
		svcs[s].Annotations = map[string]string{AnnotationEnabled: "true", AnnotationTrafficDistribution: "PreferClose"}
		objs = append(objs, svcs[s], scaleSlice(s, 0, perSvc))
	}
	client, istio := newClient(objs...), newIstio()
	const debounce = 10 * time.Millisecond
	src, err := New(Config{Client: client, Istio: istio, NodeName: "n0", ClusterID: "c1", Debounce: debounce, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	listen := kerneltest.FreeAddr(t)
	RunAgent(t, loader.AgentConfig{Source: src, Cgroup: kerneltest.Cgroup(t), BPFFS: kerneltest.BPFFS(t), Listen: listen})
	awaitServices(t, listen, services, 120*time.Second)
	rng := rand.New(rand.NewPCG(12, 50))
	lat := map[string][]time.Duration{}
	hasRule := map[int]bool{}
	for v := 1; v <= changes; v++ {
		s := rng.IntN(services)
		kind, apply := scaleRuleChange(t, client, istio, svcs[s], v, hasRule[s])
		if kind == "rule created" || kind == "rule deleted" {
			hasRule[s] = !hasRule[s]
		}
		want := scaleWant(s, perSvc, hasRule[s], svcs[s].Annotations[AnnotationTrafficDistribution])
		stop := listenAll(t, scaleAddrs(s, perSvc))
		before := etag(listen)
		apply()
		what := fmt.Sprintf("change %d (%s) of Service %d", v, kind, s)
		lat[kind] = append(lat[kind], awaitNewTree(t, listen, before, time.Now(), what))
		askLands(t, scaleVIP(s), want, what)
		stop()
	}
	for kind, l := range lat {
		p50, p99, worst := percentiles(l)
		t.Logf("%s → kernel over %d changes at %d Services (debounce %v included): p50 %v, p99 %v, max %v", kind, len(l), services, debounce, p50, p99, worst)
		if p50 > debounce+50*time.Millisecond {
			t.Errorf("%s: p50 %v over the budget (debounce + 50 ms)", kind, p50)
		}
	}
}

// scaleRuleChange prepares change v of Service svc and returns its kind and
// the API call that makes it: every other change creates the Service's
// DestinationRule, the others flip its annotation; a Service with a rule
// has it deleted.
func scaleRuleChange(t *testing.T, client *fake.Clientset, istio *dynamicfake.FakeDynamicClient, svc *corev1.Service, v int, hasRule bool) (string, func()) {
	rules := istio.Resource(DestinationRuleResource).Namespace(svc.Namespace)
	name := "rule-" + svc.Name
	switch {
	case hasRule: // the rule decides: an annotation change would change nothing
		return "rule deleted", func() {
			if err := rules.Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	case v%2 == 0:
		dr := drObject(&oDR{ns: svc.Namespace, name: name, host: svc.Name, policy: &oPolicy{
			lbSet: true, lb: &oLB{failoverPriority: []string{LabelRegion}}, od: true,
		}})
		return "rule created", func() {
			if _, err := rules.Create(context.Background(), dr, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	td := "PreferSameNode"
	if svc.Annotations[AnnotationTrafficDistribution] == td {
		td = "PreferClose"
	}
	svc.Annotations[AnnotationTrafficDistribution] = td
	updated := svc.DeepCopy()
	return "annotation changed", func() {
		if _, err := client.CoreV1().Services(svc.Namespace).Update(context.Background(), updated, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// scaleAddrs are Service s's endpoint addresses (scaleSlice version 0).
func scaleAddrs(s, n int) []string {
	sl := scaleSlice(s, 0, n)
	out := make([]string, 0, n)
	for _, e := range sl.Endpoints {
		out = append(out, net.JoinHostPort(e.Addresses[0], "1080"))
	}
	return out
}

// scaleWant are the endpoints a connect from n0 may reach: the node i%27 of
// endpoint i is in region (i%27)%3 and zone (i%27)%9.
func scaleWant(s, n int, rule bool, td string) []string {
	all := scaleAddrs(s, n)
	var out []string
	for i, a := range all {
		nd := i % 27
		switch {
		case rule && nd%3 == 0, !rule && td == "PreferClose" && nd%9 == 0, !rule && td == "PreferSameNode" && nd == 0:
			out = append(out, a)
		}
	}
	return out
}
