package kubernetes_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/loader/source/kubernetes"
)

// TestKernelSessionAffinityFromKubernetes: a Service with sessionAffinity:
// ClientIP, through the fake API and the Kubernetes source into the kernel,
// keeps this client (the test's netns) on one of its three candidates;
// set back to None, the same client's connections spread again.
func TestKernelSessionAffinityFromKubernetes(t *testing.T) {
	kerneltest.RequireRoot(t)
	kerneltest.Backends(t, []string{"127.0.10.1:10080", "127.0.10.2:10080", "127.0.10.3:10080"})
	objs := kernelObjects()
	svc := objs[3].(*corev1.Service)
	svc.Annotations = map[string]string{kubernetes.AnnotationScopes: "network"} // all three are candidates
	svc.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
	svc.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](60)}}
	client := fake.NewClientset(objs...)
	k := startKernelAgent(t, client)
	if seen := backendsSeen(t, 30); len(seen) != 1 {
		t.Fatalf("ClientIP: one client reached %v, want one backend", seen)
	}
	svc.Spec.SessionAffinity, svc.Spec.SessionAffinityConfig = corev1.ServiceAffinityNone, nil
	ok(t)(client.CoreV1().Services("default").Update(context.Background(), svc, metav1.UpdateOptions{}))
	k.installNext(t, 2)
	if seen := backendsSeen(t, 30); len(seen) < 2 { // random over 3: P(one) = 3^-29
		t.Fatalf("None: 30 connections reached only %v", seen)
	}
}

func backendsSeen(t *testing.T, n int) map[string]int {
	t.Helper()
	seen := map[string]int{}
	for range n {
		got, err := kerneltest.Ask(vip)
		if err != nil {
			t.Fatal(err)
		}
		seen[got]++
	}
	return seen
}
