package kubernetes

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestDistributeRules: distribute rules are checked as Istio's validation
// checks them (ValidateLocalityLbSetting and validateLocalities,
// istio/istio pkg/config/validation/agent/validation.go:531-566 and :647 at
// 86c9f01fd735): weights 1 to 100 adding up to 100, one trailing "*" at
// most, no empty segment. A good rule converts unchanged, ready for the
// tree's field; until the tree has it, a rule with distribute is reported.
func TestDistributeRules(t *testing.T) {
	tests := []struct {
		in   localityDistribute
		want string // "" ok, else part of the error
	}{
		{localityDistribute{From: "us-west/zone1/*", To: map[string]uint32{"us-west/zone1/*": 80, "us-west/zone2/*": 20}}, ""},
		{localityDistribute{From: "*", To: map[string]uint32{"us-east": 100}}, ""},
		{localityDistribute{From: "us-west", To: map[string]uint32{"us-west": 80}}, "add up to 80"},
		{localityDistribute{From: "us-west", To: map[string]uint32{"us-west": 0, "us-east": 100}}, "weight 0"},
		{localityDistribute{From: "us-west", To: map[string]uint32{"us-west": 101}}, "weight 101"},
		{localityDistribute{From: "us-*/zone1", To: map[string]uint32{"us-west": 100}}, "at the end"},
		{localityDistribute{From: "us-west/**", To: map[string]uint32{"us-west": 100}}, "at most one"},
		{localityDistribute{From: "us-west//z", To: map[string]uint32{"us-west": 100}}, "empty"},
		{localityDistribute{From: "", To: map[string]uint32{"us-west": 100}}, "empty"},
		{localityDistribute{From: "a/b/c/d", To: map[string]uint32{"us-west": 100}}, "region/zone/subzone"},
	}
	for _, tt := range tests {
		got, err := distributeRules([]localityDistribute{tt.in})
		switch {
		case tt.want == "" && (err != nil || !reflect.DeepEqual(got, []distributeRule{{From: tt.in.From, To: tt.in.To}})):
			t.Errorf("%+v: %v, %v", tt.in, got, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%+v: err %v, want %q", tt.in, err, tt.want)
		}
	}
	on := true
	set, err := ruleSettings(settings{}, &loadBalancer{LocalityLbSetting: &LocalityLBSetting{Enabled: &on, Distribute: []localityDistribute{tests[0].in}}}, nil, tdAny, nil)
	if err != nil {
		t.Errorf("a good distribute rule: %v", err)
	}
	if want := []distributeRule{{From: tests[0].in.From, To: tests[0].in.To}}; !reflect.DeepEqual(set.distribute, want) ||
		!reflect.DeepEqual(set.scopes, []string{"region", "zone", "subzone"}) || set.spillover == nil || set.spillover.PanicThreshold != nil {
		t.Errorf("distribute settings: %+v (the rules and Envoy's default priority load, without outlier detection: Istio applies distribute without it)", set)
	}
	// Istio accepts overlapping targets; the tree does not, and says why
	// before the rule reaches the tree, so the rest of the tree still builds.
	overlap := localityDistribute{From: "us-west", To: map[string]uint32{"us-east": 50, "us-east/zone1": 50}}
	if _, err := ruleSettings(settings{}, &loadBalancer{LocalityLbSetting: &LocalityLBSetting{Enabled: &on, Distribute: []localityDistribute{overlap}}}, nil, tdAny, nil); err == nil || !strings.Contains(err.Error(), "distribute") {
		t.Errorf("overlapping targets: %v, want the tree's refusal", err)
	}
}

// TestParseMeshConfig: the mesh default and root namespace come from
// Istio's mesh config; a field replaces Istio's default
// (pkg/config/mesh/mesh.go:85-91); an unknown localityLbSetting field is
// refused.
func TestParseMeshConfig(t *testing.T) {
	m, err := ParseMeshConfig([]byte("rootNamespace: mesh-root\nlocalityLbSetting:\n  enabled: true\n  failover:\n  - from: r1\n    to: r2\ndefaultConfig:\n  concurrency: 2\n"))
	if err != nil || m.RootNamespace != "mesh-root" || len(m.LocalityLB.Failover) != 1 || m.LocalityLB.Failover[0].To != "r2" {
		t.Errorf("ParseMeshConfig = %+v, %v", m, err)
	}
	if m, err := ParseMeshConfig([]byte("accessLogFile: /dev/stdout\n")); err != nil || !reflect.DeepEqual(m, DefaultMesh()) {
		t.Errorf("without the fields: %+v, %v; want Istio's defaults", m, err)
	}
	if _, err := ParseMeshConfig([]byte("localityLbSetting:\n  failoverPriorty: [x]\n")); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "failoverPriorty") {
		t.Errorf("unknown field: %v", err)
	}
}
