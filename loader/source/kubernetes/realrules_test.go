package kubernetes

import (
	"context"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/loctree/loctree/shared"
)

// TestRealServerDestinationRules, with Istio's CRD on a real API server: a
// rule's failover reaches the tree; a rule the tree cannot honour
// (failover together with a failoverPriority of three labels, network first, which the
// CRD's schema accepts) is a Warning Event on the DestinationRule and every update
// keeps the last good settings; a misspelt field is what the server
// stores, not what was written: the CRD's structural schema prunes it, so
// the rule the source reads is the rest of it, applied without an Event.
func TestRealServerDestinationRules(t *testing.T) {
	r := onRealServer(t)
	installDestinationRuleCRD(t, r)
	r.rbacScenario(t) // reviews, its slice, and its rule failing r1 over to r2
	c := runFromKubeconfig(t, kubeconfig(t, r.cp.Admin()), r.ns+"-a", io.Discard)
	fq := r.fqdn("reviews")
	good := failoverTo(fq, "r2")
	c.waitFor(t, 0, "the rule's failover r1 → r2", good)

	n := c.count()
	r.updateRule(t, map[string]any{"failover": []any{map[string]any{"from": "r1", "to": "r3"}}, "failoverPriority": []any{LabelNetwork, "topology.istio.io/cluster", "example.com/env"}})
	ev := r.waitEvent(t, ReasonUnsupportedRule)
	if ev.InvolvedObject.Kind != "DestinationRule" || ev.InvolvedObject.Name != "reviews" || !strings.Contains(ev.Message, "failover together with a failoverPriority of 3 labels") {
		t.Errorf("event on %s %s: %q", ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Message)
	}
	time.Sleep(300 * time.Millisecond)
	for _, u := range c.since(n) {
		if !good(u) {
			t.Errorf("an update left the last good failover: %+v", u.Topology.Services)
		}
	}

	stored := r.updateRule(t, map[string]any{"failover": []any{map[string]any{"from": "r1", "to": "r3"}}, "failoverPriorty": []any{LabelNetwork}})
	if _, kept := stored["failoverPriorty"]; kept {
		t.Fatalf("the server kept the misspelt field: %v", stored)
	}
	c.waitFor(t, n, "the stored rule's failover r1 → r3", failoverTo(fq, "r3"))
}

func failoverTo(name, to string) func(Update) bool {
	return func(u Update) bool {
		s, ok := findService(u, name)
		return ok && reflect.DeepEqual(s.Failover, []shared.FailoverSpec{{From: "r1", To: to}})
	}
}

// updateRule sets the localityLbSetting of the reviews rule and returns it
// as the server stored it.
func (r *realServer) updateRule(t *testing.T, lb map[string]any) map[string]any {
	t.Helper()
	ctx := context.Background()
	rules := dynamic.NewForConfigOrDie(r.cp.Admin()).Resource(DestinationRuleResource).Namespace(r.ns)
	dr, err := rules.Get(ctx, "reviews", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedMap(dr.Object, lb, "spec", "trafficPolicy", "loadBalancer", "localityLbSetting"); err != nil {
		t.Fatal(err)
	}
	got, err := rules.Update(ctx, dr, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stored, _, _ := unstructured.NestedMap(got.Object, "spec", "trafficPolicy", "loadBalancer", "localityLbSetting")
	return stored
}

// waitEvent waits for an Event of the test's namespace with reason.
func (r *realServer) waitEvent(t *testing.T, reason string) corev1.Event {
	t.Helper()
	var found corev1.Event
	eventually(t, 10*time.Second, "a "+reason+" Event", func() bool {
		evs, err := r.admin.CoreV1().Events(r.ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, e := range evs.Items {
			if e.Reason == reason {
				found = e
				return true
			}
		}
		return false
	})
	return found
}
