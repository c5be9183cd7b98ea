package istio

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loctree/loctree/internal/httpserve"
)

// TestAgentNotOnEveryAddress: the agent (host network) listens on the
// node's pod-facing address from the downward API (status.hostIP), not on
// every interface; the expanded --listen binds for an IPv4 and an IPv6
// host IP (loopback stands in for the node here) through the listener the
// agent uses.
func TestAgentNotOnEveryAddress(t *testing.T) {
	ds := decodeFile(t, "base/daemonset.yaml")[0].(*appsv1.DaemonSet)
	agent := ds.Spec.Template.Spec.Containers[0]
	var listen string
	for _, a := range agent.Args {
		if v, ok := strings.CutPrefix(a, "--listen="); ok {
			listen = v
		}
	}
	if !strings.Contains(listen, "$(HOST_IP)") {
		t.Fatalf("--listen=%q: want the node's pod-facing address, $(HOST_IP)", listen)
	}
	var hostIP *corev1.EnvVar
	for i, e := range agent.Env {
		if e.Name == "HOST_IP" {
			hostIP = &agent.Env[i]
		}
	}
	if hostIP == nil || hostIP.ValueFrom == nil || hostIP.ValueFrom.FieldRef == nil || hostIP.ValueFrom.FieldRef.FieldPath != "status.hostIP" {
		t.Fatalf("HOST_IP is not the downward API's status.hostIP: %+v", hostIP)
	}
	for _, ip := range []string{"127.0.0.1", "::1"} {
		addr := strings.ReplaceAll(strings.Replace(listen, ":15099", ":0", 1), "$(HOST_IP)", ip)
		ln, err := httpserve.Listen(addr, 1)
		if err != nil {
			t.Errorf("--listen with HOST_IP=%s (%s): %v", ip, addr, err)
			continue
		}
		ln.Close()
	}
}

// TestTreeServiceNodeLocal: the tree Service sends each proxy to its own
// node's agent (internalTrafficPolicy: Local, which istiod honours:
// pilot/pkg/serviceregistry/kube/conversion.go:50-57 and
// pilot/pkg/xds/endpoints/endpoint_builder.go:596-599 at 86c9f01fd735).
func TestTreeServiceNodeLocal(t *testing.T) {
	svc := decodeFile(t, "base/service.yaml")[0].(*corev1.Service)
	if p := svc.Spec.InternalTrafficPolicy; p == nil || *p != corev1.ServiceInternalTrafficPolicyLocal {
		t.Errorf("internalTrafficPolicy = %v, want Local", p)
	}
}

// TestNetworkPolicyAdmitsOnlyProxies: a NetworkPolicy selects the agent's
// pods and admits, on the tree port only, pods that carry a label only
// Istio's proxies (sidecars and gateways) carry.
func TestNetworkPolicyAdmitsOnlyProxies(t *testing.T) {
	var np *networkingv1.NetworkPolicy
	for _, p := range manifestFiles(t) {
		for _, obj := range decodeFile(t, p) {
			if o, ok := obj.(*networkingv1.NetworkPolicy); ok {
				np = o
			}
		}
	}
	if np == nil {
		t.Fatal("no NetworkPolicy in istio/")
	}
	ds := decodeFile(t, "base/daemonset.yaml")[0].(*appsv1.DaemonSet)
	if np.Namespace != ds.Namespace || np.Spec.PodSelector.MatchLabels["app.kubernetes.io/name"] != ds.Spec.Template.Labels["app.kubernetes.io/name"] {
		t.Errorf("NetworkPolicy %s/%s does not select the agent's pods", np.Namespace, np.Name)
	}
	if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) || len(np.Spec.Ingress) != 1 {
		t.Fatalf("policy types %v, %d ingress rules; want Ingress, one rule", np.Spec.PolicyTypes, len(np.Spec.Ingress))
	}
	rule := np.Spec.Ingress[0]
	if len(rule.Ports) != 1 || rule.Ports[0].Port.IntValue() != 15099 {
		t.Errorf("ports %v, want 15099 only", rule.Ports)
	}
	for _, from := range rule.From {
		if from.PodSelector == nil || from.NamespaceSelector == nil || from.IPBlock != nil || !selectsProxies(from.PodSelector) {
			t.Errorf("peer %+v admits more than proxies", from)
		}
	}
	if len(rule.From) == 0 {
		t.Error("no peer: every source admitted")
	}
}

// selectsProxies says a pod selector requires a label only Istio's proxies
// carry: security.istio.io/tlsMode=istio (sidecar injector,
// manifests/charts/istio-control/istio-discovery/files/injection-template.yaml:34),
// gateway.networking.k8s.io/gateway-name (gateways istiod deploys,
// files/kube-gateway.yaml:59-68) or istio=ingressgateway|egressgateway (the
// istio/gateway chart, manifests/charts/gateway/templates/_helpers.tpl:20).
func selectsProxies(sel *metav1.LabelSelector) bool {
	if sel.MatchLabels["security.istio.io/tlsMode"] == "istio" {
		return true
	}
	for _, e := range sel.MatchExpressions {
		switch {
		case e.Key == "gateway.networking.k8s.io/gateway-name" && e.Operator == metav1.LabelSelectorOpExists:
			return true
		case e.Key == "istio" && e.Operator == metav1.LabelSelectorOpIn && len(e.Values) > 0 && !slices.ContainsFunc(e.Values, func(v string) bool { return !strings.HasSuffix(v, "gateway") }):
			return true
		}
	}
	return false
}
