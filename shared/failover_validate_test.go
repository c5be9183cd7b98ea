package shared

import (
	"errors"
	"strings"
	"testing"
)

// TestFailoverAsIstioValidates: the failover rules Istio's
// ValidateLocalityLbSetting refuses are refused with Istio's reason, and
// those it accepts are accepted. Vectors: the failover cases of
// TestValidateLocalityLbSetting, istio/istio
// pkg/config/validation/agent/validation_test.go at 86c9f01f (the
// "invalid failover ..." and "failover provided without outlier detection
// policy" cases; loctree has no outlier detection to warn about).
func TestFailoverAsIstioValidates(t *testing.T) {
	cases := []struct {
		name  string
		rules []FailoverSpec
		want  string // Istio's error; "" accepted
	}{
		{"invalid failover src and dst have same region", []FailoverSpec{{From: "region1", To: "region1"}},
			"locality lb failover settings must specify different regions"},
		{"invalid failover src contain '*' wildcard", []FailoverSpec{{From: "*", To: "region2"}},
			"locality lb failover region should not contain '*' wildcard"},
		{"invalid failover dst contain '*' wildcard", []FailoverSpec{{From: "region1", To: "*"}},
			"locality lb failover region should not contain '*' wildcard"},
		{"invalid failover src contain '/' separator", []FailoverSpec{{From: "region1/zone1", To: "region2"}},
			"locality lb failover only specify region"},
		{"invalid failover dst contain '/' separator", []FailoverSpec{{From: "region1", To: "region2/zone1"}},
			"locality lb failover only specify region"},
		{"failover provided without outlier detection policy", []FailoverSpec{{From: "us-east", To: "eu-west"}, {From: "us-west", To: "eu-east"}}, ""},
		// The issue's own: never matching, accepted silently before.
		{"issue 26: zone in from", []FailoverSpec{{From: "r1/z1", To: "r2"}}, "locality lb failover only specify region"},
		{"issue 26: wildcard from", []FailoverSpec{{From: "*", To: "r2"}}, "locality lb failover region should not contain '*' wildcard"},
		{"wildcard inside a region", []FailoverSpec{{From: "us-*", To: "r2"}}, "locality lb failover region should not contain '*' wildcard"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			top := &Topology{Services: []ServiceSpec{{Name: "a", Spillover: &SpilloverSpec{}, Failover: c.rules,
				Endpoints: []EndpointSpec{{Address: "127.0.0.1:80", Locality: Locality{"region": "region2"}}}}}}
			_, err := Build(top, BuildOptions{})
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v; Istio accepts %v", err, c.rules)
			case c.want != "" && (!errors.Is(err, ErrInvalidTopology) || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("error %v, want ErrInvalidTopology with Istio's %q", err, c.want)
			}
		})
	}
}
