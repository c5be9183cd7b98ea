package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/internal/testing/realcp"
	"github.com/loctree/loctree/shared"
)

// TestAgentXDSFromRealIstiod runs `loctree agent --source xds` as a user
// in a cluster would, with the flags docs/ISTIO.md gives: TLS to a real
// istiod's secure xDS port, its root from the namespace's
// istio-ca-root-cert, a token of audience istio-ca, ztunnel's identity.
// The agent's tree holds the Service istiod serves, with the Pod as its
// endpoint in its Node's locality, and /metrics says the stream is up.
func TestAgentXDSFromRealIstiod(t *testing.T) {
	kerneltest.RequireRoot(t)
	realcp.RequireIstiod(t)
	cp := realcp.StartPrivate(t, realcp.Options{})
	istiod := realcp.StartIstiod(t, cp)
	ns := cp.Namespace(t)
	admin := kubernetes.NewForConfigOrDie(cp.Admin())
	node := ns + "-a"
	createIstioScene(t, admin, ns, node)
	dir := t.TempDir()
	ca, token := filepath.Join(dir, "root-cert.pem"), filepath.Join(dir, "istio-token")
	writeFile(t, ca, realcp.IstioRootCert(t, admin, ns))
	writeFile(t, token, realcp.IstioToken(t, admin, ns, "default"))
	listen := kerneltest.FreeAddr(t)
	p := startLoctree(t, "agent", "--source", "xds", "--xds-address", istiod.SecureXDSAddress(),
		"--xds-ca-file", ca, "--xds-server-name", "istiod.istio-system.svc", "--xds-token-file", token,
		"--node", node, "--xds-namespace", ns, "--xds-pod-name", "loctree-agent", "--xds-instance-ip", "100.127.0.1",
		"--cgroup", kerneltest.Cgroup(t), "--bpffs", filepath.Join(kerneltest.BPFFS(t), "loctree"), "--listen", listen)
	name := "web." + ns + ".svc.cluster.local"
	kerneltest.Eventually(t, 30*time.Second, name+" in the agent's tree", func() error {
		code, _, body, err := httpGet("http://" + listen + "/v1/tree")
		if err != nil || code != 200 {
			return fmt.Errorf("/v1/tree: %d %v\n%s", code, err, p.log)
		}
		tree, err := shared.Decode([]byte(body))
		if err != nil {
			return err
		}
		svc, ok := tree.Service(name)
		if !ok {
			return fmt.Errorf("no %s yet", name)
		}
		r := svc.Lookup(shared.Locality{"network": "", "region": "r1", "zone": "z1"})
		if r.Len() != 1 || tree.Endpoint(r.Lo).Addr.String() != "100.64.1.1:8080" {
			return fmt.Errorf("%s from r1/z1: %d candidates", name, r.Len())
		}
		return nil
	})
	_, _, metrics, _ := httpGet("http://" + listen + "/metrics")
	for _, want := range []string{"loctree_xds_connected 1", "loctree_source_up 1", "loctree_xds_nacks_total 0"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics has no %q", want)
		}
	}
}

// createIstioScene writes a Node in r1/z1, a Service asking for
// PreferSameZone and its ready Pod on that Node.
func createIstioScene(t *testing.T, admin kubernetes.Interface, ns, node string) {
	t.Helper()
	ctx := context.Background()
	realcp.CreateDefaultServiceAccount(t, admin, ns)
	labels := realcp.Owned(ns)
	labels["topology.kubernetes.io/region"], labels["topology.kubernetes.io/zone"] = "r1", "z1"
	if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: labels}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app": "web"}, TrafficDistribution: ptr.To("PreferSameZone"),
		Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
	}}
	if _, err := admin.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	realcp.CreateRunningPod(t, admin, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: ns, Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{NodeName: node, AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: "app", Image: "example.invalid/app"}}},
	}, true, "100.64.1.1")
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}
