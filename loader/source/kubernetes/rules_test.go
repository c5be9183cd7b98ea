package kubernetes

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	networking "istio.io/api/networking/v1alpha3"
	typev1beta1 "istio.io/api/type/v1beta1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"

	"github.com/loctree/loctree/internal/testing/syncbuf"
	"github.com/loctree/loctree/shared"
)

// TestRuleFieldNamesMatchIstioAPI: every JSON name the agent decodes is the
// JSON name of the same field in istio.io/api's Go types (the proto's
// json= names), so a renamed or misspelt field cannot go unnoticed.
func TestRuleFieldNamesMatchIstioAPI(t *testing.T) {
	pairs := []struct{ ours, theirs any }{
		{destinationRuleSpec{}, networking.DestinationRule{}},
		{workloadSelector{}, typev1beta1.WorkloadSelector{}},
		{trafficPolicy{}, networking.TrafficPolicy{}},
		{portTrafficPolicy{}, networking.TrafficPolicy_PortTrafficPolicy{}},
		{portSelector{}, networking.PortSelector{}},
		{loadBalancer{}, networking.LoadBalancerSettings{}},
		{outlierDetection{}, networking.OutlierDetection{}},
		{LocalityLBSetting{}, networking.LocalityLoadBalancerSetting{}},
		{localityDistribute{}, networking.LocalityLoadBalancerSetting_Distribute{}},
		{localityFailover{}, networking.LocalityLoadBalancerSetting_Failover{}},
	}
	for _, p := range pairs {
		names := protoJSONNames(reflect.TypeOf(p.theirs))
		ours := reflect.TypeOf(p.ours)
		for i := range ours.NumField() {
			tag, _, _ := strings.Cut(ours.Field(i).Tag.Get("json"), ",")
			if tag != "" && !names[tag] {
				t.Errorf("%s.%s: JSON name %q is not a field of %s (it has %v)", ours.Name(), ours.Field(i).Name, tag, reflect.TypeOf(p.theirs).Name(), names)
			}
		}
	}
}

// protoJSONNames are the JSON names of a generated message's fields: json=
// in the protobuf tag, or name= where the two are the same.
func protoJSONNames(typ reflect.Type) map[string]bool {
	out := map[string]bool{}
	for i := range typ.NumField() {
		var name, json string
		for _, part := range strings.Split(typ.Field(i).Tag.Get("protobuf"), ",") {
			if v, ok := strings.CutPrefix(part, "name="); ok {
				name = v
			}
			if v, ok := strings.CutPrefix(part, "json="); ok {
				json = v
			}
		}
		if json == "" {
			json = name
		}
		if json != "" {
			out[json] = true
		}
	}
	return out
}

// reviewsWorld is one Service, reviews.default, with endpoints in two
// zones, and no traffic distribution: only a DestinationRule manages it.
func reviewsWorld() []runtime.Object {
	svc := service("default", "reviews", "", []string{"127.77.0.10"}, 9080)
	sl := slice("default", "reviews", "reviews-a", discoveryv1.AddressTypeIPv4,
		[]ep{{addr: "127.0.1.1", node: "n0"}, {addr: "127.0.1.2", node: "n1"}}, 10080)
	return []runtime.Object{svc, sl, node("n0", zoneLabels("r1", "z1", "", "")), node("n1", zoneLabels("r1", "z2", "", ""))}
}

func reviewsRule(lb map[string]any) *unstructured.Unstructured {
	u := drObject(&oDR{ns: "default", name: "reviews", host: "reviews"})
	spec := u.Object["spec"].(map[string]any)
	spec["trafficPolicy"] = map[string]any{
		"loadBalancer":     map[string]any{"localityLbSetting": lb},
		"outlierDetection": map[string]any{"consecutive5xxErrors": int64(5)},
	}
	return u
}

// TestDestinationRuleFromAPI: a DestinationRule created, changed and
// deleted through the API reaches the tree; each setting the tree cannot
// honour is a Warning Event on the DestinationRule naming it, and the
// service keeps its last good settings meanwhile.
func TestDestinationRuleFromAPI(t *testing.T) {
	client, istio := newClient(reviewsWorld()...), newIstio()
	c := runIstio(t, client, istio, DefaultMesh())
	c.waitFor(t, 0, "first update", func(u Update) bool { return true })
	good := reviewsRule(map[string]any{"failoverPriority": []any{"topology.kubernetes.io/region", "topology.kubernetes.io/zone"}})
	must(t)(istio.Resource(DestinationRuleResource).Namespace("default").Create(ctx, good, metav1.CreateOptions{}))
	zero := uint32(0)
	want := func(u Update) bool {
		s, ok := findService(u, reviews)
		return ok && slices.Equal(s.Scopes, []string{"region", "zone"}) && s.Spillover != nil &&
			reflect.DeepEqual(s.Spillover, &shared.SpilloverSpec{PanicThreshold: &zero}) && len(s.Endpoints) == 2
	}
	c.waitFor(t, 0, "the rule's failoverPriority", want)

	for _, bad := range []struct {
		name string
		lb   map[string]any
		says string
	}{
		{"distribute beyond the tree", map[string]any{"distribute": []any{map[string]any{"from": "r1/z1/*", "to": nineTargets()}}}, "distribute"},
		{"unknown field", map[string]any{"failoverPriorty": []any{"topology.kubernetes.io/zone"}}, `unknown field "failoverPriorty"`},
		{"failover with three failoverPriority labels, network first", map[string]any{"failover": []any{map[string]any{"from": "r1", "to": "r2"}},
			"failoverPriority": []any{"topology.istio.io/network", "topology.istio.io/cluster", "example.com/env"}}, "failover together with a failoverPriority of 3 labels"},
		{"failover with failoverPriority label=value", map[string]any{"failover": []any{map[string]any{"from": "r1", "to": "r2"}},
			"failoverPriority": []any{"topology.istio.io/network=n1"}}, "a label with a value before region"},
		{"bad label=value", map[string]any{"failoverPriority": []any{"topology.kubernetes.io/zone=z1=z2"}}, "z1=z2"},
		{"failover to itself", map[string]any{"failover": []any{map[string]any{"from": "r1", "to": "r1"}}}, "locality lb failover settings must specify different regions"},
		{"failover with a zone", map[string]any{"failover": []any{map[string]any{"from": "r1/z1", "to": "r2"}}}, "locality lb failover only specify region"},
		{"bad weights", map[string]any{"distribute": []any{map[string]any{"from": "r1/*", "to": map[string]any{"r1/*": int64(80)}}}}, "add up to 80"},
	} {
		n := c.count()
		rule := reviewsRule(bad.lb)
		must(t)(istio.Resource(DestinationRuleResource).Namespace("default").Update(ctx, rule, metav1.UpdateOptions{}))
		ev := waitEventIn(t, client, "default", bad.says)
		if ev.Type != corev1.EventTypeWarning || ev.Reason != ReasonUnsupportedRule || ev.InvolvedObject.Kind != "DestinationRule" ||
			ev.InvolvedObject.Name != "reviews" || !strings.Contains(ev.Message, "last good") {
			t.Errorf("%s: event %s %s on %s %s: %q", bad.name, ev.Type, ev.Reason, ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Message)
		}
		for _, u := range c.since(n) {
			if !want(u) {
				t.Errorf("%s: an update left the last good settings: %+v", bad.name, u.Topology.Services)
			}
		}
	}
	must(t)(istio.Resource(DestinationRuleResource).Namespace("default").Update(ctx, reviewsRule(map[string]any{"enabled": false}), metav1.UpdateOptions{}))
	c.waitFor(t, 0, "locality off", func(u Update) bool {
		s, ok := findService(u, reviews)
		return ok && s.LocalityLB != nil && !*s.LocalityLB
	})
	if err := istio.Resource(DestinationRuleResource).Namespace("default").Delete(ctx, "reviews", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitFor(t, 0, "the service unmanaged without its rule", func(u Update) bool { _, ok := findService(u, reviews); return !ok && len(u.Changed) > 0 })
}

// TestDestinationRuleResourceMissing: without the DestinationRule resource
// (Istio not installed) the agent logs it once and serves its Services.
func TestDestinationRuleResourceMissing(t *testing.T) {
	istio := newIstio()
	istio.PrependReactor("list", "destinationrules", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(DestinationRuleResource.GroupResource(), "")
	})
	istio.PrependWatchReactor("destinationrules", func(k8stesting.Action) (bool, watch.Interface, error) {
		return true, nil, apierrors.NewNotFound(DestinationRuleResource.GroupResource(), "")
	})
	var logs syncbuf.Buffer
	svc := service("default", "reviews", "PreferClose", []string{"127.77.0.10"}, 9080)
	src, err := New(Config{Client: newClient(svc, node("n0", nil)), Istio: istio, NodeName: "n0",
		Debounce: time.Millisecond, MaxDelay: 10 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{ch: make(chan struct{}, 1)}
	done := make(chan error, 1)
	cctx, cancel := context.WithCancel(ctx)
	go func() { done <- src.Run(cctx, c.publish) }()
	c.waitFor(t, 0, "the service without Istio", func(u Update) bool { return len(u.Topology.Services) == 1 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(logs.String(), "DestinationRules are not served"); n != 1 {
		t.Errorf("%d log lines about the missing resource, want 1:\n%s", n, logs.String())
	}
}

// TestDestinationRuleResourceInstalledLater: when Istio is installed after
// the agent started, the agent finds the DestinationRules at its next look.
func TestDestinationRuleResourceInstalledLater(t *testing.T) {
	defer func(d time.Duration) { crdRecheck = d }(crdRecheck)
	crdRecheck = 20 * time.Millisecond
	var installed atomic.Bool
	istio := newIstio(reviewsRule(map[string]any{"failoverPriority": []any{"topology.kubernetes.io/zone"}}))
	missing := func(k8stesting.Action) (bool, runtime.Object, error) {
		if installed.Load() {
			return false, nil, nil
		}
		return true, nil, apierrors.NewNotFound(DestinationRuleResource.GroupResource(), "")
	}
	istio.PrependReactor("list", "destinationrules", missing)
	istio.PrependWatchReactor("destinationrules", func(a k8stesting.Action) (bool, watch.Interface, error) {
		if installed.Load() {
			return false, nil, nil
		}
		return true, nil, apierrors.NewNotFound(DestinationRuleResource.GroupResource(), "")
	})
	c := runIstio(t, newClient(reviewsWorld()...), istio, DefaultMesh())
	c.waitFor(t, 0, "first update", func(Update) bool { return true })
	installed.Store(true)
	c.waitFor(t, 0, "the rule after Istio was installed", func(u Update) bool {
		s, ok := findService(u, reviews)
		return ok && slices.Equal(s.Scopes, []string{"zone"})
	})
}

// nineTargets are distribute targets Istio accepts (weights adding up to
// 100) and the tree cannot hold: it takes 8 targets per rule.
func nineTargets() map[string]any {
	to := map[string]any{}
	for i := range 9 {
		to[fmt.Sprintf("r%d", i+1)] = int64(11)
	}
	to["r1"] = int64(12)
	return to
}

// Issue 26 item 7: a DestinationRule's failover goes through the build a
// topology file's goes through, so the agent warns of a region no
// endpoint has; the update carries the Nodes, so a from region only a
// Node is in (a source there) is no warning.
func TestDestinationRuleFailoverWarnings(t *testing.T) {
	world := append(reviewsWorld(), node("n2", zoneLabels("r3", "z1", "", "")))
	rule := reviewsRule(map[string]any{"failover": []any{
		map[string]any{"from": "r3", "to": "r1"}, map[string]any{"from": "r1", "to": "r2x"}}})
	c := runIstio(t, newClient(world...), newIstio(rule), DefaultMesh())
	u := c.waitFor(t, 0, "the rule's failover", func(u Update) bool {
		s, ok := findService(u, reviews)
		return ok && len(s.Failover) == 2
	})
	var b shared.Builder
	if _, err := b.Update(u.Topology.Services, nil, 1); err != nil {
		t.Fatal(err)
	}
	got := b.Warnings(u.Nodes)
	if len(got) != 1 || got[0].Field != "failover[1].to" || got[0].Value != "r2x" || !slices.Equal(got[0].Known, []string{"r1"}) {
		t.Fatalf("warnings %v, want one: failover[1].to r2x (known r1)", got)
	}
}
