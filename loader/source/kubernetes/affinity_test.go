package kubernetes

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// TestSessionAffinity maps spec.sessionAffinity: ClientIP onto
// consistent_hash with the Service's timeout. Kubernetes' rules:
// pkg/apis/core/v1/defaults.go SetDefaults_Service gives a ClientIP
// Service without sessionAffinityConfig.clientIP.timeoutSeconds
// DefaultClientIPServiceAffinitySeconds (10800);
// pkg/apis/core/validation/validation.go validateAffinityTimeout accepts
// 0 < timeoutSeconds <= MaxClientIPServiceAffinitySeconds (86400).
func TestSessionAffinity(t *testing.T) {
	tests := []struct {
		name    string
		aff     corev1.ServiceAffinity
		timeout *int32
		policy  string // the loctree.io/policy annotation, if any
		want    uint32 // 0: no session affinity
		bad     string
	}{
		{name: "none", aff: corev1.ServiceAffinityNone},
		{name: "unset"},
		{name: "client ip", aff: corev1.ServiceAffinityClientIP, timeout: ptr.To[int32](30), want: 30},
		{name: "client ip default", aff: corev1.ServiceAffinityClientIP, want: 10800},
		{name: "client ip maximum", aff: corev1.ServiceAffinityClientIP, timeout: ptr.To[int32](86400), want: 86400},
		{name: "with consistent_hash", aff: corev1.ServiceAffinityClientIP, timeout: ptr.To[int32](5), policy: "consistent_hash", want: 5},
		{name: "zero", aff: corev1.ServiceAffinityClientIP, timeout: ptr.To[int32](0), bad: "timeoutSeconds 0: want 1 to 86400"},
		{name: "over a day", aff: corev1.ServiceAffinityClientIP, timeout: ptr.To[int32](86401), bad: "timeoutSeconds 86401: want 1 to 86400"},
		{name: "other policy", aff: corev1.ServiceAffinityClientIP, policy: "round_robin", bad: "sessionAffinity ClientIP needs policy consistent_hash, not round_robin"},
		{name: "unknown affinity", aff: "Cookie", bad: `sessionAffinity "Cookie": want None or ClientIP`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := service("ns", "s", "PreferClose", nil, 80)
			svc.Spec.SessionAffinity = tt.aff
			if tt.timeout != nil {
				svc.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: tt.timeout}}
			}
			if tt.policy != "" {
				svc.Annotations = map[string]string{AnnotationPolicy: tt.policy}
			}
			set, _, err := serviceSettings(svc, policyInput{})
			if tt.bad != "" {
				if !errors.Is(err, ErrBadAnnotation) || !strings.Contains(err.Error(), tt.bad) {
					t.Fatalf("err = %v, want ErrBadAnnotation mentioning %q", err, tt.bad)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			spec := (&treeInput{svc: svc, set: set.base}).header(&svc.Spec.Ports[0], true, 0, family{})
			switch {
			case tt.want == 0 && spec.SessionAffinity != nil:
				t.Fatalf("session affinity %+v, want none", spec.SessionAffinity)
			case tt.want == 0:
			case spec.Policy != "consistent_hash" || spec.SessionAffinity == nil || *spec.SessionAffinity.TimeoutSeconds != tt.want:
				t.Fatalf("policy %q, session affinity %+v; want consistent_hash, %d s", spec.Policy, spec.SessionAffinity, tt.want)
			}
		})
	}
}
