package kubernetes

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/loctree/loctree/shared"
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

// TestFailoverWithTwoPriorityLabels: failover rules together with a
// failoverPriority of network and cluster (Istio's "FailoverPriority with
// Failover", loadbalancer_test.go at b6787c12) become the scopes
// [network, cluster, region, zone, subzone] with the rules, which the
// tree ranks by class (docs/FORMAT.md "Classes before the locality"); a
// third label after network is more than it holds, and says so.
func TestFailoverWithTwoPriorityLabels(t *testing.T) {
	on := true
	set := &LocalityLBSetting{Enabled: &on, Failover: []localityFailover{{From: "r1", To: "r2"}},
		FailoverPriority: []string{LabelNetwork, "topology.istio.io/cluster"}}
	got, err := failoverSettings(settings{}, set, &outlierDetection{}, tdAny)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.scopes, []string{"network", "cluster", "region", "zone", "subzone"}) || len(got.failover) != 1 || got.failover[0] != (shared.FailoverSpec{From: "r1", To: "r2"}) {
		t.Fatalf("scopes %v, failover %v", got.scopes, got.failover)
	}
	if _, err := shared.Build(&shared.Topology{Services: []shared.ServiceSpec{{Name: "s", Scopes: got.scopes, Failover: got.failover, Spillover: &shared.SpilloverSpec{},
		Endpoints: []shared.EndpointSpec{{Address: "127.0.0.1:80"}}}}}, shared.BuildOptions{}); err != nil {
		t.Fatalf("the tree refuses the scopes: %v", err)
	}
	set.FailoverPriority = append(set.FailoverPriority, "example.com/env")
	if _, err := failoverSettings(settings{}, set, &outlierDetection{}, tdAny); err == nil || !strings.Contains(err.Error(), "up to 3 labels (2 with the network first)") {
		t.Fatalf("three labels after network: %v", err)
	}
}
