package realcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// OwnerLabel marks a cluster-scoped object (a Node, a ClusterRoleBinding)
// a test made for its Namespace: the Namespace's cleanup deletes the
// objects of these kinds that carry it (clusterScoped).
const OwnerLabel = "realcp.loctree.io/namespace"

// clusterScoped are the cluster-scoped kinds a Namespace's cleanup deletes
// by OwnerLabel.
func clusterScoped() []schema.GroupVersionResource {
	return []schema.GroupVersionResource{
		{Version: "v1", Resource: "nodes"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"},
	}
}

// Owned is the label map that ties a cluster-scoped object to namespace ns.
func Owned(ns string) map[string]string { return map[string]string{OwnerLabel: ns} }

// Namespace creates a fresh namespace for the test, named after it, and
// removes it when the test ends with everything in it and every
// cluster-scoped object labelled Owned by it. No controller manager runs,
// so the cleanup deletes the contents itself and then finalizes the
// namespace, which the namespace controller would otherwise do.
func (cp *ControlPlane) Namespace(tb testing.TB) string {
	tb.Helper()
	admin := kubernetes.NewForConfigOrDie(cp.Admin())
	name := namespaceName(tb.Name())
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := admin.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		tb.Fatalf("create namespace %s: %v", name, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := cp.removeNamespace(ctx, name); err != nil {
			tb.Errorf("remove namespace %s: %v", name, err)
		}
	})
	return name
}

var notDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// namespaceName is the test's name as a DNS label with a random suffix.
func namespaceName(test string) string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	base := strings.Trim(notDNS.ReplaceAllString(strings.ToLower(test), "-"), "-")
	if len(base) > 48 {
		base = strings.TrimRight(base[:48], "-")
	}
	return base + "-" + hex.EncodeToString(b)
}

func (cp *ControlPlane) removeNamespace(ctx context.Context, name string) error {
	dyn, err := dynamic.NewForConfig(cp.quietAdmin())
	if err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	for _, gvr := range clusterScoped() {
		sel := metav1.ListOptions{LabelSelector: OwnerLabel + "=" + name}
		if err := dyn.Resource(gvr).DeleteCollection(ctx, metav1.DeleteOptions{}, sel); err != nil {
			return fmt.Errorf("delete %s of %s: %w", gvr.Resource, name, err)
		}
	}
	if err := cp.deleteContents(ctx, dyn, name); err != nil {
		return err
	}
	return cp.finalize(ctx, name)
}

// deleteContents deletes every object of every namespaced kind in ns.
func (cp *ControlPlane) deleteContents(ctx context.Context, dyn dynamic.Interface, ns string) error {
	disc, err := discovery.NewDiscoveryClientForConfig(cp.quietAdmin())
	if err != nil {
		return fmt.Errorf("discovery client: %w", err)
	}
	lists, err := disc.ServerPreferredNamespacedResources()
	if err != nil {
		return fmt.Errorf("discover namespaced kinds: %w", err)
	}
	for _, list := range lists {
		gv, _ := schema.ParseGroupVersion(list.GroupVersion)
		for _, r := range list.APIResources {
			if !slices.Contains(r.Verbs, "deletecollection") {
				continue
			}
			err := dyn.Resource(gv.WithResource(r.Name)).Namespace(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
			if err != nil {
				return fmt.Errorf("delete %s in %s: %w", r.Name, ns, err)
			}
		}
	}
	return nil
}

// finalize deletes the namespace and clears its finalizers, as the
// namespace controller does once the namespace is empty.
func (cp *ControlPlane) finalize(ctx context.Context, name string) error {
	admin := kubernetes.NewForConfigOrDie(cp.Admin())
	if err := admin.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	ns, err := admin.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get: %w", err)
	}
	ns.Spec.Finalizers = nil
	if _, err := admin.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("finalize: %w", err)
	}
	return nil
}

// quietAdmin is Admin without the server's deprecation warnings, which
// deleting every kind (v1 Endpoints among them) draws.
func (cp *ControlPlane) quietAdmin() *rest.Config {
	cfg := cp.Admin()
	cfg.WarningHandler = rest.NoWarnings{}
	return cfg
}
