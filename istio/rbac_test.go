package istio

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/loctree/loctree/loader/source/kubernetes"
)

// TestClusterRoleIsWhatTheAgentCalls runs the agent's Kubernetes source
// (loader/source/kubernetes, with client-go's informers and event recorder) on
// client-go's fake clientset and fake dynamic client (DestinationRules), records every API call it makes, and checks
// that the ClusterRole grants exactly those (group, resource, verb) triples:
// nothing the agent needs is missing, nothing is granted that it never
// uses. The Service's annotation goes bad, bad another way, then bad the
// first way again: client-go's event correlator then patches the first
// Event (k8s.io/client-go/tools/record/event.go:336-346, recordEvent), so
// the run covers every call the source can make.
func TestClusterRoleIsWhatTheAgentCalls(t *testing.T) {
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
	var mu sync.Mutex
	used := map[string]bool{}
	istio := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{kubernetes.DestinationRuleResource: "DestinationRuleList"})
	for _, fake := range []interface {
		PrependReactor(string, string, k8stesting.ReactionFunc)
		PrependWatchReactor(string, k8stesting.WatchReactionFunc)
	}{client, istio} {
		fake.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
			mu.Lock()
			defer mu.Unlock()
			used[a.GetResource().Group+"/"+a.GetResource().Resource+":"+a.GetVerb()] = true
			return false, nil, nil
		})
		fake.PrependWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) {
			mu.Lock()
			defer mu.Unlock()
			used[a.GetResource().Group+"/"+a.GetResource().Resource+":"+a.GetVerb()] = true
			return false, nil, nil
		})
	}
	src, err := kubernetes.New(kubernetes.Config{Client: client, Istio: istio, NodeName: "n1", ClusterID: "c1",
		Debounce: time.Millisecond, MaxDelay: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, func(kubernetes.Update) error { return nil }) }()
	defer func() { cancel(); <-done }()

	svcs := corev1.SchemeGroupVersion.WithResource("services")
	for i, mode := range []string{"sticky", "stickier", "sticky"} {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "reviews", Namespace: "default",
			Annotations: map[string]string{kubernetes.AnnotationEnabled: "true", kubernetes.AnnotationMode: mode}},
			Spec: corev1.ServiceSpec{ClusterIP: "127.96.0.10", Ports: []corev1.ServicePort{{Port: 9080}}}}
		apply := client.Tracker().Update
		if i == 0 {
			apply = func(gvr schema.GroupVersionResource, obj runtime.Object, ns string, _ ...metav1.UpdateOptions) error {
				return client.Tracker().Create(gvr, obj, ns)
			}
		}
		if err := apply(svcs, svc, "default"); err != nil {
			t.Fatal(err)
		}
		waitFor(t, &mu, used, []string{"/events:create", "/events:create", "/events:patch"}[i])
		time.Sleep(50 * time.Millisecond)
	}

	cr := decodeFile(t, "base/clusterrole.yaml")[0].(*rbacv1.ClusterRole)
	granted := map[string]bool{}
	for _, r := range cr.Rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					granted[g+"/"+res+":"+v] = true
				}
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if g, u := slices.Sorted(maps.Keys(granted)), slices.Sorted(maps.Keys(used)); !slices.Equal(g, u) {
		t.Errorf("the ClusterRole grants\n  %v\nthe agent calls\n  %v", g, u)
	}
}

func waitFor(t *testing.T, mu *sync.Mutex, used map[string]bool, call string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		ok := used[call]
		mu.Unlock()
		if ok {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the agent never made the call %s", call)
}
