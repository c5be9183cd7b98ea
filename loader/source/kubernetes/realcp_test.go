package kubernetes

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/loctree/loctree/internal/testing/realcp"
	"github.com/loctree/loctree/shared"
)

// realServer is the test binary's real control plane and a fresh
// namespace of the test's own (realcp), with an admin client.
type realServer struct {
	cp    *realcp.ControlPlane
	ns    string
	admin k8s.Interface
}

// onRealServer skips the test without the real control plane's binaries
// (fails it in CI) and gives it a fresh namespace.
func onRealServer(t *testing.T) *realServer {
	t.Helper()
	cp := controlPlane.Get(t)
	return &realServer{cp: cp, ns: cp.Namespace(t), admin: k8s.NewForConfigOrDie(cp.Admin())}
}

// kubeconfig writes a kubeconfig file for cfg into the test's directory.
func kubeconfig(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := realcp.WriteKubeconfig(cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// runFromKubeconfig runs a Source as node `node` with the clients the
// agent builds from a kubeconfig (NewClient, NewIstioClient), logging to
// log; Run must return nil.
func runFromKubeconfig(t *testing.T, path, node string, log io.Writer) *collector {
	t.Helper()
	return runFromKubeconfigWith(t, path, node, log, func(err error) bool { return err == nil })
}

// runFromKubeconfigWith is runFromKubeconfig where Run's result must satisfy ok.
func runFromKubeconfigWith(t *testing.T, path, node string, log io.Writer, ok func(error) bool) *collector {
	t.Helper()
	client, err := NewClient(path)
	if err != nil {
		t.Fatal(err)
	}
	istio, err := NewIstioClient(path)
	if err != nil {
		t.Fatal(err)
	}
	return collectWith(t, Config{Client: client, Istio: istio, NodeName: node, Logger: slog.New(slog.NewTextHandler(log, nil))}, ok)
}

// node creates a Node owned by the test's namespace (deleted with it),
// named <ns>-<name>.
func (r *realServer) node(t *testing.T, name string, labels map[string]string) *corev1.Node {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: r.ns + "-" + name, Labels: realcp.Owned(r.ns)}}
	for k, v := range labels {
		n.Labels[k] = v
	}
	got, err := r.admin.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// create creates a Service or an EndpointSlice in the test's namespace
// and returns what the API server stored.
func (r *realServer) create(t *testing.T, obj any) any {
	t.Helper()
	ctx := context.Background()
	var got any
	var err error
	switch o := obj.(type) {
	case *corev1.Service:
		o.Namespace = r.ns
		got, err = r.admin.CoreV1().Services(r.ns).Create(ctx, o, metav1.CreateOptions{})
	case *discoveryv1.EndpointSlice:
		o.Namespace = r.ns
		got, err = r.admin.DiscoveryV1().EndpointSlices(r.ns).Create(ctx, o, metav1.CreateOptions{})
	default:
		t.Fatalf("create %T", obj)
	}
	if err != nil {
		t.Fatalf("create %T: %v", obj, err)
	}
	return got
}

// fqdn is the tree service name of the first port of Service name in the
// test's namespace.
func (r *realServer) fqdn(name string) string { return name + "." + r.ns + ".svc.cluster.local" }

// ownServices are the tree services of the test's namespace in u.
func (r *realServer) ownServices(u Update) []shared.ServiceSpec {
	var out []shared.ServiceSpec
	for _, s := range u.Topology.Services {
		if strings.Contains(s.Name, "."+r.ns+".svc.") {
			out = append(out, s)
		}
	}
	return out
}

func describe(specs []shared.ServiceSpec) string {
	var b strings.Builder
	for _, s := range specs {
		fmt.Fprintf(&b, "%s(%d endpoints) ", s.Name, len(s.Endpoints))
	}
	return b.String()
}

// eventually polls ok every 20 ms until it holds or within passes.
func eventually(t *testing.T, within time.Duration, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); !ok(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
	}
}
