package kubernetes

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

// TestTrafficDistributionMatchesIstio: for every combination of the spec
// field and the Service and Namespace annotations, trafficDistribution
// gives what Istio's GetTrafficDistribution (transcribed in
// istio_oracle_test.go, pilot/pkg/model/service.go:841) gives, except that
// an unknown annotation value, which Istio logs and reads as no preference,
// is an error naming the annotation.
func TestTrafficDistributionMatchesIstio(t *testing.T) {
	specs := []*string{nil, ptr.To(""), ptr.To("PreferClose"), ptr.To("PreferSameZone"), ptr.To("PreferSameNode"), ptr.To("PreferSameRegion")}
	values := []string{"", "PreferClose", "preferclose", "PREFERSAMEZONE", "PreferSameNode", "prefersamenode", "Bogus", "PreferSameZon"}
	n := 0
	for _, spec := range specs {
		for _, sv := range values {
			for _, nv := range values {
				svc := service("ns", "s", "", nil, 80)
				svc.Spec.TrafficDistribution = spec
				svc.Annotations = annotation(sv)
				nsAnn := annotation(nv)
				got, err := trafficDistribution(svc, nsAnn)
				want := oGetTrafficDistribution(spec, svc.Annotations, nsAnn)
				unknown := func(v string) bool { return v != "" && oGetTrafficDistribution(nil, annotation(v), nil) == 0 }
				specKnown := spec != nil && oGetTrafficDistribution(spec, nil, nil) != 0
				wantErr := !specKnown && (unknown(sv) || (sv == "" && unknown(nv)))
				switch {
				case wantErr && !errors.Is(err, ErrBadAnnotation):
					t.Errorf("spec %v, service %q, namespace %q: err %v, want ErrBadAnnotation", deref(spec), sv, nv, err)
				case !wantErr && (err != nil || int(got) != want):
					t.Errorf("spec %v, service %q, namespace %q: %v, %v; Istio %v", deref(spec), sv, nv, got, err, want)
				}
				n++
			}
		}
	}
	t.Logf("%d combinations", n)
}

func annotation(v string) map[string]string {
	if v == "" {
		return nil
	}
	return map[string]string{AnnotationTrafficDistribution: v}
}

func deref(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}

// TestNamespaceTrafficDistribution: through the fake API, a Service
// without spec.trafficDistribution follows its Namespace's annotation
// (managed, PreferSameNode scopes); a Namespace annotation change reaches
// the tree; the Service's own annotation wins over the Namespace's; a typo
// in it is a Warning Event on the Service and the service keeps its last
// good settings while its endpoints still flow.
func TestNamespaceTrafficDistribution(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Annotations: map[string]string{AnnotationTrafficDistribution: "PreferSameNode"}}}
	svc := service("shop", "cart", "", []string{"127.77.1.1"}, 80)
	sl := slice("shop", "cart", "cart-1", discoveryv1.AddressTypeIPv4, []ep{{addr: "127.0.1.1", node: "n0"}}, 1080)
	client := newClient(ns, svc, sl, node("n0", zoneLabels("r1", "z1", "", "")))
	c := run(t, client, "n0")
	const name = "cart.shop.svc.cluster.local"
	scopesAre := func(want []string, eps int) func(Update) bool {
		return func(u Update) bool {
			s, ok := findService(u, name)
			return ok && slices.Equal(s.Scopes, want) && len(s.Endpoints) == eps
		}
	}
	c.waitFor(t, 0, "the namespace's PreferSameNode", scopesAre(sameNodeScopes, 1))

	n := c.count()
	ns.Annotations[AnnotationTrafficDistribution] = "preferclose"
	must(t)(client.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}))
	c.waitFor(t, n, "the namespace's PreferClose", scopesAre(closeScopes, 1))

	n = c.count()
	svc.Annotations = map[string]string{AnnotationTrafficDistribution: "PreferSameNode"}
	must(t)(client.CoreV1().Services("shop").Update(ctx, svc, metav1.UpdateOptions{}))
	c.waitFor(t, n, "the service's annotation over the namespace's", scopesAre(sameNodeScopes, 1))

	n = c.count()
	svc.Annotations[AnnotationTrafficDistribution] = "PreferSameNod"
	must(t)(client.CoreV1().Services("shop").Update(ctx, svc, metav1.UpdateOptions{}))
	ev := waitEventIn(t, client, "shop", "PreferSameNod")
	if ev.Type != corev1.EventTypeWarning || ev.Reason != ReasonBadAnnotation || ev.InvolvedObject.Name != "cart" ||
		!strings.Contains(ev.Message, AnnotationTrafficDistribution) || !strings.Contains(ev.Message, "last good") {
		t.Errorf("event %s %s on %s: %q", ev.Type, ev.Reason, ev.InvolvedObject.Name, ev.Message)
	}
	sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{Addresses: []string{"127.0.1.2"}, NodeName: ptr.To("n0")})
	must(t)(client.DiscoveryV1().EndpointSlices("shop").Update(ctx, sl, metav1.UpdateOptions{}))
	u := c.waitFor(t, n, "a new endpoint", func(u Update) bool { s, _ := findService(u, name); return len(s.Endpoints) == 2 })
	if s, _ := findService(u, name); !slices.Equal(s.Scopes, sameNodeScopes) {
		t.Errorf("scopes %v under a bad annotation, want the last good %v", s.Scopes, sameNodeScopes)
	}

	delete(svc.Annotations, AnnotationTrafficDistribution)
	must(t)(client.CoreV1().Services("shop").Update(ctx, svc, metav1.UpdateOptions{}))
	c.waitFor(t, n, "the fixed service back on the namespace's value", scopesAre(closeScopes, 2))
}

// TestNamespaceTrafficDistributionTypo: a typo on the Namespace is
// reported on its Services, which are not managed until it is fixed.
func TestNamespaceTrafficDistributionTypo(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Annotations: map[string]string{AnnotationTrafficDistribution: "PreferZone"}}}
	client := newClient(ns, service("shop", "cart", "", []string{"127.77.1.1"}, 80), node("n0", nil))
	c := run(t, client, "n0")
	ev := waitEventIn(t, client, "shop", "PreferZone")
	if !strings.Contains(ev.Message, "namespace shop") || !strings.Contains(ev.Message, "not managed") {
		t.Errorf("event %q does not name the namespace or say the service is not managed", ev.Message)
	}
	ns.Annotations[AnnotationTrafficDistribution] = "PreferSameZone"
	must(t)(client.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}))
	c.waitFor(t, 0, "the fixed namespace", func(u Update) bool { return len(u.Topology.Services) == 1 })
}

func waitEventIn(t *testing.T, client *fake.Clientset, ns, substr string) corev1.Event {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		evs, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs.Items {
			if strings.Contains(ev.Message, substr) {
				return ev
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no event in %s mentioning %q", ns, substr)
	return corev1.Event{}
}
