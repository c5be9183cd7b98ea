package kubernetes

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

// TestBadAnnotationKeepsLastGood: a bad annotation raises a Warning Event on
// the Service, the service keeps its last good settings (endpoint changes still
// flow), and fixing it applies the new settings.
func TestBadAnnotationKeepsLastGood(t *testing.T) {
	svc := service("default", "reviews", "", []string{"127.77.0.10"}, 9080)
	svc.Annotations = map[string]string{AnnotationEnabled: "true", AnnotationMode: "strict"}
	sl := slice("default", "reviews", "reviews-a", discoveryv1.AddressTypeIPv4, []ep{{addr: "127.0.1.1", node: "n1"}}, 10080)
	client := newClient(asObjects([]any{svc, sl}, clusterNodes())...)
	c := run(t, client, "n1")
	c.waitFor(t, 0, "reviews strict", func(u Update) bool { s, _ := findService(u, reviews); return s.Mode == "strict" })

	n := c.count()
	svc.Annotations[AnnotationScopes] = "region,zome"
	must(t)(client.CoreV1().Services("default").Update(ctx, svc, metav1.UpdateOptions{}))
	ev := waitEvent(t, client, "zome")
	if ev.Type != corev1.EventTypeWarning || ev.Reason != ReasonBadAnnotation || ev.InvolvedObject.Name != "reviews" ||
		!strings.Contains(ev.Message, "last good settings") {
		t.Errorf("event = %s %s %s %q", ev.Type, ev.Reason, ev.InvolvedObject.Name, ev.Message)
	}
	// An endpoint change is still applied, with the last good scopes and mode.
	sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{Addresses: []string{"127.0.1.2"}, NodeName: ptr.To("n2")})
	must(t)(client.DiscoveryV1().EndpointSlices("default").Update(ctx, sl, metav1.UpdateOptions{}))
	u := c.waitFor(t, n, "second endpoint", func(u Update) bool { s, _ := findService(u, reviews); return len(s.Endpoints) == 2 })
	if s, _ := findService(u, reviews); s.Mode != "strict" || len(s.Scopes) != 4 {
		t.Errorf("after a bad annotation: mode %q scopes %v, want the last good strict, 4 scopes", s.Mode, s.Scopes)
	}
	for _, u := range c.since(n) {
		for _, s := range u.Topology.Services {
			if len(s.Scopes) == 2 {
				t.Fatalf("the bad scopes reached an update: %v", s.Scopes)
			}
		}
	}

	n = c.count()
	svc.Annotations[AnnotationScopes] = "region,zone"
	must(t)(client.CoreV1().Services("default").Update(ctx, svc, metav1.UpdateOptions{}))
	c.waitFor(t, n, "fixed scopes", func(u Update) bool { s, _ := findService(u, reviews); return len(s.Scopes) == 2 })
}

// TestBadAnnotationNeverGood: a Service whose first version is bad is not
// managed, and says so in its Event.
func TestBadAnnotationNeverGood(t *testing.T) {
	svc := service("default", "reviews", "PreferClose", []string{"127.77.0.10"}, 9080)
	svc.Annotations = map[string]string{AnnotationPolicy: "fastest"}
	client := newClient(asObjects([]any{svc}, clusterNodes())...)
	c := run(t, client, "n1")
	ev := waitEvent(t, client, "fastest")
	if !strings.Contains(ev.Message, "not managed") {
		t.Errorf("event message %q does not say the service is not managed", ev.Message)
	}
	u := c.waitFor(t, 0, "first update", func(Update) bool { return true })
	if len(u.Topology.Services) != 0 {
		t.Errorf("services = %v, want none", u.Topology.Services)
	}
}

// TestOneReporter: with agents on n1 and n2, only n1's (the smallest node
// name) raises the Event; both keep the last good settings.
func TestOneReporter(t *testing.T) {
	svc := service("default", "reviews", "PreferClose", []string{"127.77.0.10"}, 9080)
	client := newClient(asObjects([]any{svc}, clusterNodes())...)
	c1, c2 := run(t, client, "n1"), run(t, client, "n2")
	c1.waitFor(t, 0, "n1 first update", func(u Update) bool { return len(u.Topology.Services) == 1 })
	c2.waitFor(t, 0, "n2 first update", func(u Update) bool { return len(u.Topology.Services) == 1 })
	svc.Annotations = map[string]string{AnnotationMode: "sticky"}
	must(t)(client.CoreV1().Services("default").Update(ctx, svc, metav1.UpdateOptions{}))
	ev := waitEvent(t, client, "sticky")
	time.Sleep(200 * time.Millisecond) // time for a second agent's Event, which must not come
	evs, err := client.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs.Items) != 1 || ev.Source.Host != "n1" {
		t.Errorf("%d events (first from %q), want 1 from n1", len(evs.Items), ev.Source.Host)
	}
}

func waitEvent(t *testing.T, client *fake.Clientset, substr string) corev1.Event {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		evs, err := client.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
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
	t.Fatalf("no event mentioning %q", substr)
	return corev1.Event{}
}
