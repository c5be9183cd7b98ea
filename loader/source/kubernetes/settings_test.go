package kubernetes

import (
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestServiceSettings(t *testing.T) {
	local := corev1.ServiceInternalTrafficPolicyLocal
	tests := []struct {
		name     string
		td       string
		itp      *corev1.ServiceInternalTrafficPolicy
		pnra     bool
		ann      map[string]string
		managed  bool
		scopes   []string
		mode     string
		policy   string
		health   string
		wantBad  bool
		external bool
	}{
		{name: "no opt-in", managed: false},
		{name: "external name", td: "PreferClose", external: true, managed: false},
		{name: "PreferClose", td: "PreferClose", managed: true, scopes: closeScopes, mode: "failover", health: "only_healthy"},
		{name: "PreferSameZone", td: "PreferSameZone", managed: true, scopes: closeScopes, mode: "failover", health: "only_healthy"},
		{name: "PreferSameNode", td: "PreferSameNode", managed: true, scopes: sameNodeScopes, mode: "failover", health: "only_healthy"},
		{name: "annotation opt-in", ann: map[string]string{AnnotationEnabled: "true"}, managed: true, scopes: optInScopes, mode: "failover", health: "only_healthy"},
		{name: "annotation opt-out wins", td: "PreferClose", ann: map[string]string{AnnotationEnabled: "false"}, managed: false},
		{name: "internal traffic local", td: "PreferClose", itp: &local, managed: true, scopes: []string{"node"}, mode: "strict", health: "only_healthy"},
		{name: "publish not ready", td: "PreferClose", pnra: true, managed: true, scopes: closeScopes, mode: "failover", health: "allow_all"},
		{name: "overrides", td: "PreferClose", ann: map[string]string{
			AnnotationScopes: " region , zone,topology.example.com/rack", AnnotationMode: "strict", AnnotationPolicy: "consistent_hash",
		}, managed: true, scopes: []string{"region", "zone", "topology.example.com/rack"}, mode: "strict", policy: "consistent_hash", health: "only_healthy"},
		{name: "bad enabled", ann: map[string]string{AnnotationEnabled: "yes"}, wantBad: true},
		{name: "typo scope", td: "PreferClose", ann: map[string]string{AnnotationScopes: "region,zome"}, wantBad: true},
		{name: "empty scope", td: "PreferClose", ann: map[string]string{AnnotationScopes: "region,,zone"}, wantBad: true},
		{name: "repeated scope", td: "PreferClose", ann: map[string]string{AnnotationScopes: "zone,zone"}, wantBad: true},
		{name: "nine scopes", td: "PreferClose", ann: map[string]string{AnnotationScopes: "a/1,a/2,a/3,a/4,a/5,a/6,a/7,a/8,a/9"}, wantBad: true},
		{name: "bad label key", td: "PreferClose", ann: map[string]string{AnnotationScopes: "example.com/bad key"}, wantBad: true},
		{name: "bad mode", td: "PreferClose", ann: map[string]string{AnnotationMode: "sticky"}, wantBad: true},
		{name: "empty mode", td: "PreferClose", ann: map[string]string{AnnotationMode: ""}, wantBad: true},
		{name: "bad policy", td: "PreferClose", ann: map[string]string{AnnotationPolicy: "fastest"}, wantBad: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := service("ns", "s", tt.td, nil, 80)
			svc.Annotations = tt.ann
			svc.Spec.InternalTrafficPolicy = tt.itp
			svc.Spec.PublishNotReadyAddresses = tt.pnra
			if tt.external {
				svc.Spec.Type = corev1.ServiceTypeExternalName
			}
			set, managed, err := serviceSettings(svc, policyInput{})
			if tt.wantBad {
				if !errors.Is(err, ErrBadAnnotation) {
					t.Fatalf("err = %v, want ErrBadAnnotation", err)
				}
				return
			}
			if err != nil || managed != tt.managed {
				t.Fatalf("managed, err = %v, %v; want %v, nil", managed, err, tt.managed)
			}
			want := settings{scopes: tt.scopes, mode: tt.mode, policy: tt.policy, health: tt.health}
			if managed && !set.base.equal(want) {
				t.Errorf("settings = %+v, want %+v", set, want)
			}
		})
	}
}

// TestTrafficDistributionScopesAreAmbients: a traffic distribution ranks as
// Istio ambient ranks it (istio/istio pilot/pkg/serviceregistry/ambient/
// services.go at 86c9f01fd735: preferSameZoneLoadBalancer, lines 704-719,
// [NETWORK, REGION, ZONE] for PreferClose and PreferSameZone;
// preferSameNodeLoadBalancer, lines 722-736, adding SUBZONE and NODE), with
// the scopes written out here rather than taken from the code under test.
// loctree's own opt-in, which Istio does not know, ranks by the locality
// levels an Envoy sidecar uses behind the network.
func TestTrafficDistributionScopesAreAmbients(t *testing.T) {
	for _, c := range []struct {
		td   string
		ann  map[string]string
		want []string
	}{
		{td: "PreferClose", want: []string{"network", "region", "zone"}},
		{td: "PreferSameZone", want: []string{"network", "region", "zone"}},
		{td: "PreferSameNode", want: []string{"network", "region", "zone", "subzone", "node"}},
		{ann: map[string]string{"networking.istio.io/traffic-distribution": "PreferClose"}, want: []string{"network", "region", "zone"}},
		{ann: map[string]string{AnnotationEnabled: "true"}, want: []string{"network", "region", "zone", "subzone"}},
	} {
		svc := service("ns", "s", c.td, nil, 80)
		svc.Annotations = c.ann
		set, managed, err := serviceSettings(svc, policyInput{})
		if err != nil || !managed || !slices.Equal(set.base.scopes, c.want) {
			t.Errorf("%q %v: scopes %v (managed %v, %v), want %v", c.td, c.ann, set.base.scopes, managed, err, c.want)
		}
	}
}
