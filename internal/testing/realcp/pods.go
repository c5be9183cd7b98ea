package realcp

import (
	"context"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// No kubelet runs: these write what one would, for tests whose reader
// (istiod) takes endpoints from Pods rather than EndpointSlices.

// CreateDefaultServiceAccount creates the namespace's default
// ServiceAccount, which Pods need and no controller manager makes here.
func CreateDefaultServiceAccount(tb testing.TB, client kubernetes.Interface, ns string) {
	tb.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	if _, err := client.CoreV1().ServiceAccounts(ns).Create(context.Background(), sa, metav1.CreateOptions{}); err != nil {
		tb.Fatal(err)
	}
}

// CreateRunningPod creates pod (its spec.nodeName set) and writes its
// status as a kubelet would: Running, Ready as given, its IPs ips (one
// per family; data only: the API server refuses loopback pod IPs).
func CreateRunningPod(tb testing.TB, client kubernetes.Interface, pod *corev1.Pod, ready bool, ips ...string) {
	tb.Helper()
	created, err := client.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	writePodStatus(tb, client, created, ready, ips)
}

// SetPodReady writes a Pod's readiness (and IPs) as a kubelet would.
func SetPodReady(tb testing.TB, client kubernetes.Interface, ns, name string, ready bool, ips ...string) {
	tb.Helper()
	pod, err := client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	writePodStatus(tb, client, pod, ready, ips)
}

func writePodStatus(tb testing.TB, client kubernetes.Interface, pod *corev1.Pod, ready bool, ips []string) {
	tb.Helper()
	cond := corev1.ConditionFalse
	if ready {
		cond = corev1.ConditionTrue
	}
	pod.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, PodIP: ips[0], HostIP: "100.127.0.1",
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: cond}, {Type: corev1.ContainersReady, Status: cond}},
	}
	for _, ip := range ips {
		pod.Status.PodIPs = append(pod.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	if _, err := client.CoreV1().Pods(pod.Namespace).UpdateStatus(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
		tb.Fatal(err)
	}
}

// IstioRootCert waits for the root certificate istiod writes to the
// namespace's istio-ca-root-cert ConfigMap and returns it (PEM).
func IstioRootCert(tb testing.TB, client kubernetes.Interface, ns string) []byte {
	tb.Helper()
	deadline := time.Now().Add(startTimeout)
	for {
		cm, err := client.CoreV1().ConfigMaps(ns).Get(context.Background(), "istio-ca-root-cert", metav1.GetOptions{})
		if err == nil && cm.Data["root-cert.pem"] != "" {
			return []byte(cm.Data["root-cert.pem"])
		}
		if time.Now().After(deadline) {
			tb.Fatalf("no istio-ca-root-cert in %s after %v: %v", ns, startTimeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// IstioToken is a token of the service account with audience istio-ca:
// what a projected istio-token volume holds, and istiod's secure xDS
// port authenticates.
func IstioToken(tb testing.TB, client kubernetes.Interface, ns, serviceAccount string) []byte {
	tb.Helper()
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"istio-ca"}}}
	tok, err := client.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), serviceAccount, req, metav1.CreateOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	return []byte(tok.Status.Token)
}
