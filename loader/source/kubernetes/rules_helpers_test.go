package kubernetes

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
)

// newIstio is a fake dynamic client serving DestinationRules.
func newIstio(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{DestinationRuleResource: "DestinationRuleList"}, objs...)
}

// runIstio starts a Source on client and istio with the mesh config mesh.
func runIstio(t testing.TB, client *fake.Clientset, istio *dynamicfake.FakeDynamicClient, mesh Mesh) *collector {
	t.Helper()
	return collect(t, Config{Client: client, Istio: istio, Mesh: mesh, NodeName: "n0"})
}

// drObject is the API object of an oracle DestinationRule.
func drObject(o *oDR) *unstructured.Unstructured {
	spec := map[string]any{"host": o.host}
	if len(o.exportTo) > 0 {
		spec["exportTo"] = strings2any(o.exportTo)
	}
	if o.selector {
		spec["workloadSelector"] = map[string]any{"matchLabels": map[string]any{"app": "x"}}
	}
	if o.policy != nil {
		spec["trafficPolicy"] = policyObject(o.policy)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "networking.istio.io/v1", "kind": "DestinationRule", "spec": spec,
	}}
	u.SetNamespace(o.ns)
	u.SetName(o.name)
	u.SetUID(types.UID("uid-" + o.ns + "-" + o.name))
	u.SetCreationTimestamp(metav1.NewTime(time.Unix(o.created, 0)))
	return u
}

func policyObject(p *oPolicy) map[string]any {
	out := map[string]any{}
	if p.lbSet {
		lb := map[string]any{"simple": "ROUND_ROBIN"}
		if p.lb != nil {
			lb = map[string]any{"localityLbSetting": lbObject(p.lb)}
		}
		out["loadBalancer"] = lb
	}
	if p.od {
		od := map[string]any{"consecutive5xxErrors": int64(7)}
		if p.minHealth != 0 {
			od["minHealthPercent"] = int64(p.minHealth)
		}
		out["outlierDetection"] = od
	}
	var ports []any
	for port, pp := range p.ports {
		pl := policyObject(pp)
		pl["port"] = map[string]any{"number": int64(port)}
		ports = append(ports, pl)
	}
	if len(ports) > 0 {
		out["portLevelSettings"] = ports
	}
	return out
}

func lbObject(l *oLB) map[string]any {
	out := map[string]any{}
	if l.enabled != nil {
		out["enabled"] = *l.enabled
	}
	if len(l.failoverPriority) > 0 {
		out["failoverPriority"] = strings2any(l.failoverPriority)
	}
	var fo []any
	for _, f := range l.failover {
		fo = append(fo, map[string]any{"from": f[0], "to": f[1]})
	}
	if len(fo) > 0 {
		out["failover"] = fo
	}
	if l.distribute {
		out["distribute"] = []any{map[string]any{"from": "r1/*", "to": map[string]any{"r1/*": int64(80), "r2/*": int64(20)}}}
	}
	return out
}

func strings2any(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

func (o *oDR) String() string {
	return fmt.Sprintf("%s/%s host=%s exportTo=%v", o.ns, o.name, o.host, o.exportTo)
}
