package realcp

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestVersionsMatchTools: the versions the cache directory is keyed by
// are the ones tools/go.mod builds, and every staging module of
// k8s.io/kubernetes is replaced by its release of the same version.
func TestVersionsMatchTools(t *testing.T) {
	data, err := os.ReadFile("tools/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	staging := "v0." + strings.TrimPrefix(KubernetesVersion, "v1.")
	want := map[string]string{"k8s.io/kubernetes": KubernetesVersion, "go.etcd.io/etcd/server/v3": EtcdVersion}
	replaces := 0
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(strings.TrimPrefix(line, "require "))
		if len(f) >= 2 && want[f[0]] != "" {
			if f[1] != want[f[0]] {
				t.Errorf("tools/go.mod requires %s %s, the cache key says %s", f[0], f[1], want[f[0]])
			}
			delete(want, f[0])
		}
		if len(f) == 4 && f[1] == "=>" {
			replaces++
			if f[2] != f[0] || f[3] != staging {
				t.Errorf("tools/go.mod: %s, want %s => %s %s", strings.TrimSpace(line), f[0], f[0], staging)
			}
		}
	}
	if len(want) > 0 {
		t.Errorf("tools/go.mod does not require %v", want)
	}
	if replaces != 33 {
		t.Errorf("%d replaces, want the 33 staging modules of k8s.io/kubernetes %s", replaces, KubernetesVersion)
	}
}

func TestNamespaceName(t *testing.T) {
	for _, test := range []string{"TestX", "TestRBAC/remove_list_nodes", strings.Repeat("TestLong", 20)} {
		got := namespaceName(test)
		if len(got) > 63 || notDNS.MatchString(got) || strings.HasPrefix(got, "-") {
			t.Errorf("namespaceName(%q) = %q: not a DNS label", test, got)
		}
	}
}

// TestControlPlane starts a control plane and checks what the tests rely
// on: its version, the admin, a service account that RBAC holds to what
// is bound to it, loopback-only listeners, and a namespace's cleanup.
func TestControlPlane(t *testing.T) {
	start := time.Now()
	cp := StartPrivate(t, Options{})
	t.Logf("etcd + kube-apiserver start to /readyz: %v", time.Since(start).Round(time.Millisecond))
	admin := kubernetes.NewForConfigOrDie(cp.Admin())
	v, err := admin.Discovery().ServerVersion()
	if err != nil || v.GitVersion != KubernetesVersion {
		t.Fatalf("server version = %v, %v; want %s", v, err, KubernetesVersion)
	}
	checkLoopbackOnly(t, cp)
	t.Run("rbac", func(t *testing.T) { testServiceAccountRBAC(t, cp) })
	t.Run("namespace", func(t *testing.T) { testNamespaceCleanup(t, cp) })
}

func testServiceAccountRBAC(t *testing.T, cp *ControlPlane) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	cfg, err := cp.ServiceAccountConfig(ctx, ns, "reader")
	if err != nil {
		t.Fatal(err)
	}
	sa := kubernetes.NewForConfigOrDie(cfg)
	_, err = sa.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "system:serviceaccount:"+ns+":reader") {
		t.Fatalf("list nodes with no binding: %v, want forbidden for system:serviceaccount:%s:reader", err, ns)
	}
	admin := kubernetes.NewForConfigOrDie(cp.Admin())
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ns + "-nodes", Labels: Owned(ns)},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"list"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ns + "-nodes", Labels: Owned(ns)},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: "reader"}}}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, func() error { _, err := sa.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); return err })
	if _, err := sa.CoreV1().Services("").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("list services, bound to list nodes only: %v, want forbidden", err)
	}
}

func testNamespaceCleanup(t *testing.T, cp *ControlPlane) {
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(cp.Admin())
	var ns string
	t.Run("inner", func(t *testing.T) {
		ns = cp.Namespace(t)
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: ns},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
		if _, err := admin.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: ns + "-n1", Labels: Owned(ns)}}
		if _, err := admin.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	if _, err := admin.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace %s after its test: %v, want not found", ns, err)
	}
	if _, err := admin.CoreV1().Nodes().Get(ctx, ns+"-n1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("node %s-n1 after its test: %v, want not found", ns, err)
	}
}

func eventually(t *testing.T, within time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %v", within, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkLoopbackOnly: every socket etcd and kube-apiserver listen on is on
// 127.0.0.0/8 (or ::1), read from /proc.
func checkLoopbackOnly(t *testing.T, cp *ControlPlane) {
	t.Helper()
	for _, p := range []*process{cp.etcd, cp.apiserver} {
		addrs, err := listening(p.cmd.Process.Pid)
		if err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
		if len(addrs) == 0 {
			t.Errorf("%s listens on nothing", p.name)
		}
		for _, a := range addrs {
			if !a.IsLoopback() {
				t.Errorf("%s listens on %v, outside 127.0.0.0/8", p.name, a)
			}
		}
	}
}
