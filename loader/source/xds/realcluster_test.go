package xds

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/loctree/loctree/internal/testing/realcp"
)

// realCluster is a test's namespace on the real API server, with an istiod
// of its own watching it. Nodes carry the test's namespace in their names.
type realCluster struct {
	cp     *realcp.ControlPlane
	admin  kubernetes.Interface
	ns     string
	istiod *realcp.Istiod
}

func onRealIstiod(t testing.TB) *realCluster {
	t.Helper()
	realcp.RequireIstiod(t)
	cp := controlPlane.Get(t)
	c := &realCluster{cp: cp, admin: kubernetes.NewForConfigOrDie(cp.Admin()), ns: cp.Namespace(t)}
	realcp.CreateDefaultServiceAccount(t, c.admin, c.ns)
	c.istiod = realcp.StartIstiod(t, cp)
	return c
}

func (c *realCluster) kubeconfig(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := realcp.WriteKubeconfig(c.cp.Admin(), path); err != nil {
		t.Fatal(err)
	}
	return path
}

// nodeName is the test's name for node n.
func (c *realCluster) nodeName(n string) string { return c.ns + "-" + n }

// node creates a Node with istiod's locality labels (empty values left out).
func (c *realCluster) node(t testing.TB, name, region, zone, subzone string) {
	t.Helper()
	labels := realcp.Owned(c.ns)
	for k, v := range map[string]string{"topology.kubernetes.io/region": region, "topology.kubernetes.io/zone": zone, "topology.istio.io/subzone": subzone} {
		if v != "" {
			labels[k] = v
		}
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: c.nodeName(name), Labels: labels}}
	if _, err := c.admin.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// pod is one Pod of a realPod.
type realPod struct {
	name, node, ip string
	app            string // its app label: the Services' selector
	ready          bool
	network        string // its topology.istio.io/network label
	ip6            string // its IPv6 address, if dual-stack
}

func (p realPod) ips() []string {
	if p.ip6 != "" {
		return []string{p.ip, p.ip6}
	}
	return []string{p.ip}
}

// pod creates a Pod on its node, running, ready as given.
func (c *realCluster) pod(t testing.TB, p realPod) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: c.ns, Labels: map[string]string{"app": p.app}},
		Spec: corev1.PodSpec{NodeName: c.nodeName(p.node), AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: "app", Image: "example.invalid/app"}}},
	}
	if p.network != "" {
		pod.Labels["topology.istio.io/network"] = p.network
	}
	realcp.CreateRunningPod(t, c.admin, pod, p.ready, p.ips()...)
}

// setReady writes a Pod's readiness.
func (c *realCluster) setReady(t testing.TB, p realPod) {
	t.Helper()
	realcp.SetPodReady(t, c.admin, c.ns, p.name, p.ready, p.ips()...)
}

// realSvc is a Service selecting app=<name>, port 80 → 8080.
type realSvc struct {
	name, td        string
	local, notReady bool   // internalTrafficPolicy Local; publishNotReadyAddresses
	dual            bool   // dual-stack (IPv4, IPv6) with a second port, 81 → 8081
	annotation      string // Istio's networking.istio.io/traffic-distribution
}

func (c *realCluster) service(t testing.TB, s realSvc) {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: s.name},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": s.name}, PublishNotReadyAddresses: s.notReady,
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	if s.td != "" {
		svc.Spec.TrafficDistribution = ptr.To(s.td)
	}
	if s.annotation != "" {
		svc.Annotations = map[string]string{"networking.istio.io/traffic-distribution": s.annotation}
	}
	if s.local {
		svc.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal)
	}
	if s.dual {
		svc.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyRequireDualStack)
		svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "admin", Port: 81, TargetPort: intstr.FromInt32(8081)})
	}
	if _, err := c.admin.CoreV1().Services(c.ns).Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// slice writes the EndpointSlices the endpointslice controller would
// write for a Service's pods (no controller manager runs), one per family
// the pods have: the Kubernetes source reads them, istiod reads the Pods.
func (c *realCluster) slice(t testing.TB, svc string, pods []realPod) {
	t.Helper()
	c.writeSlice(t, svc, svc, discoveryv1.AddressTypeIPv4, pods, func(p realPod) string { return p.ip })
	if len(pods) > 0 && pods[0].ip6 != "" {
		c.writeSlice(t, svc, svc+"-v6", discoveryv1.AddressTypeIPv6, pods, func(p realPod) string { return p.ip6 })
	}
}

func (c *realCluster) writeSlice(t testing.TB, svc, name string, family discoveryv1.AddressType, pods []realPod, addr func(realPod) string) {
	t.Helper()
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: family,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	if pods[0].ip6 != "" {
		sl.Ports = append(sl.Ports, discoveryv1.EndpointPort{Name: ptr.To("admin"), Port: ptr.To[int32](8081), Protocol: ptr.To(corev1.ProtocolTCP)})
	}
	for _, p := range pods {
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{
			Addresses: []string{addr(p)}, NodeName: ptr.To(c.nodeName(p.node)),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(p.ready), Serving: ptr.To(p.ready), Terminating: ptr.To(false)},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: c.ns, Name: p.name},
		})
	}
	ctx := context.Background()
	old, err := c.admin.DiscoveryV1().EndpointSlices(c.ns).Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		sl.ResourceVersion = old.ResourceVersion
		_, err = c.admin.DiscoveryV1().EndpointSlices(c.ns).Update(ctx, sl, metav1.UpdateOptions{})
	} else {
		_, err = c.admin.DiscoveryV1().EndpointSlices(c.ns).Create(ctx, sl, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
}

// fqdn is the tree name of a Service's first port.
func (c *realCluster) fqdn(svc string) string {
	return fmt.Sprintf("%s.%s.svc.cluster.local", svc, c.ns)
}

// within polls cond every 20 ms for up to d.
func within(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
