package render

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	extensionsv1alpha1 "istio.io/api/extensions/v1alpha1"
	networkingv1alpha3 "istio.io/api/networking/v1alpha3"
	typev1beta1 "istio.io/api/type/v1beta1"
	istioext "istio.io/client-go/pkg/apis/extensions/v1alpha1"
	istionetv1 "istio.io/client-go/pkg/apis/networking/v1"
	istionetv1alpha3 "istio.io/client-go/pkg/apis/networking/v1alpha3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Label and annotation keys set on the Service.
const (
	PersistentSessionLabel = "istio.io/persistent-session-header"
	EnabledAnnotation      = "loctree.io/enabled"
	PartOfLabel            = "app.kubernetes.io/part-of"
)

// meta names an object render owns; the label lets an uninstall find it.
func meta(name, namespace string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{PartOfLabel: "loctree"}}
}

func wasmPlugin(t target) (*istioext.WasmPlugin, error) {
	header, format, fallbacks := OverrideHostHeader, "plain", 2.0
	if t.steering == SteeringPersistentSession {
		header, format, fallbacks = SessionHeader, "base64", 0
	}
	conf, err := structpb.NewStruct(map[string]any{
		"tree": map[string]any{
			"cluster": TreeCluster, "authority": TreeAuthority, "path": "/v1/tree",
			"refresh_ms": 5000.0, "timeout_ms": 2000.0,
		},
		"header": header, "header_format": format, "fallbacks": fallbacks, "fail_closed": false,
	})
	if err != nil {
		return nil, fmt.Errorf("plugin config: %w", err)
	}
	return &istioext.WasmPlugin{
		TypeMeta:   metav1.TypeMeta{APIVersion: "extensions.istio.io/v1alpha1", Kind: "WasmPlugin"},
		ObjectMeta: meta("loctree", RootNamespace),
		Spec: extensionsv1alpha1.WasmPlugin{
			Url:             t.wasmURL,
			ImagePullPolicy: extensionsv1alpha1.PullPolicy_IfNotPresent,
			Type:            extensionsv1alpha1.PluginType_HTTP,
			// Deliberate: a module that cannot be pulled or started leaves
			// requests unsteered (allow-all in its place), not failed
			// (FAIL_CLOSE: deny-all); docs/ISTIO.md has the trade-off.
			FailStrategy: extensionsv1alpha1.FailStrategy_FAIL_OPEN,
			Match:        []*extensionsv1alpha1.WasmPlugin_TrafficSelector{{Mode: typev1beta1.WorkloadMode_CLIENT}},
			PluginConfig: conf,
		},
	}, nil
}

// servicePatch is a partial Service for `kubectl apply --server-side`.
func servicePatch(t target) *corev1.Service {
	svc := &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{
			Name: t.name, Namespace: t.namespace,
			Annotations: map[string]string{EnabledAnnotation: "true"},
		},
	}
	if t.steering == SteeringPersistentSession {
		svc.Labels = map[string]string{PersistentSessionLabel: SessionHeader}
	}
	return svc
}

func envoyFilter(t target) (*istionetv1alpha3.EnvoyFilter, error) {
	value, err := overrideHostPatch()
	if err != nil {
		return nil, err
	}
	var patches []*networkingv1alpha3.EnvoyFilter_EnvoyConfigObjectPatch
	for _, ctx := range []networkingv1alpha3.EnvoyFilter_PatchContext{networkingv1alpha3.EnvoyFilter_SIDECAR_OUTBOUND, networkingv1alpha3.EnvoyFilter_GATEWAY} {
		patches = append(patches, &networkingv1alpha3.EnvoyFilter_EnvoyConfigObjectPatch{
			ApplyTo: networkingv1alpha3.EnvoyFilter_CLUSTER,
			Match: &networkingv1alpha3.EnvoyFilter_EnvoyConfigObjectMatch{
				Context: ctx,
				ObjectTypes: &networkingv1alpha3.EnvoyFilter_EnvoyConfigObjectMatch_Cluster{
					Cluster: &networkingv1alpha3.EnvoyFilter_ClusterMatch{Service: t.fqdn, PortNumber: t.port},
				},
			},
			Patch: &networkingv1alpha3.EnvoyFilter_Patch{Operation: networkingv1alpha3.EnvoyFilter_Patch_MERGE, Value: value},
		})
	}
	return &istionetv1alpha3.EnvoyFilter{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.istio.io/v1alpha3", Kind: "EnvoyFilter"},
		ObjectMeta: meta(fmt.Sprintf("loctree-%s-%s-%d", t.name, t.namespace, t.port), RootNamespace),
		Spec:       networkingv1alpha3.EnvoyFilter{ConfigPatches: patches},
	}, nil
}

func destinationRule(t target) *istionetv1.DestinationRule {
	return &istionetv1.DestinationRule{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.istio.io/v1", Kind: "DestinationRule"},
		ObjectMeta: meta(t.name+"-loctree", t.namespace),
		Spec: networkingv1alpha3.DestinationRule{
			Host: t.fqdn,
			TrafficPolicy: &networkingv1alpha3.TrafficPolicy{
				LoadBalancer: &networkingv1alpha3.LoadBalancerSettings{
					LbPolicy:          &networkingv1alpha3.LoadBalancerSettings_Simple{Simple: networkingv1alpha3.LoadBalancerSettings_ROUND_ROBIN},
					LocalityLbSetting: &networkingv1alpha3.LocalityLoadBalancerSetting{Enabled: wrapperspb.Bool(true)},
				},
				OutlierDetection: &networkingv1alpha3.OutlierDetection{
					Consecutive_5XxErrors: wrapperspb.UInt32(5),
					Interval:              durationpb.New(10 * time.Second),
					BaseEjectionTime:      durationpb.New(30 * time.Second),
					MaxEjectionPercent:    50,
				},
			},
		},
	}
}
