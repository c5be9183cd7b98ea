package kernel

import (
	"testing"

	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/shared"
)

// distLocalityCase is issue 26 item 5's example (shared's
// distLocalityCase), shares worked by hand from Istio's applyLocalityWeights
// (istio/istio pilot/pkg/networking/core/loadbalancer/loadbalancer.go at
// b6787c126ec0: ceil(weight · W_L / ΣW) per matching locality) and Envoy's
// effectiveLocalityWeight (envoyproxy/envoy source/common/upstream/
// locality_wrr.cc at e8e02bb2: W · min(1, 1.4 · healthy/hosts)), not from
// loctree. A rule from r1 to r1/z1 70, r2 30; from r1/z1/s1:
//
//	r1/z1/s1: .1 healthy, .2 unhealthy: ceil(2·70/6) = 24 → 24·0.7 = 16.8
//	r1/z1/s2: .3 healthy, weight 4:     ceil(4·70/6) = 47 → 47
//	r2/z1/s1: .4 healthy:               30 → 30
//	r3/z1/s1: .5 healthy: in no target.
//
// .1 16.8/93.8, .3 47/93.8, .4 30/93.8. Weighing the target r1/z1 as a whole
// (before) gave .1 and .3 35 % each.
func distLocalityCase() loadsCase {
	w4, of, threshold := uint32(4), uint32(140), uint32(50)
	ep := func(addr, r, s string) shared.EndpointSpec {
		return shared.EndpointSpec{Address: addr, Locality: shared.Locality{"region": r, "zone": "z1", "subzone": s}}
	}
	spec := shared.ServiceSpec{Name: "distloc", VIP: "127.77.26.5:80",
		Spillover:  &shared.SpilloverSpec{OverprovisioningFactor: &of, PanicThreshold: &threshold},
		Distribute: []shared.DistributeSpec{{From: "r1", To: map[string]uint32{"r1/z1": 70, "r2": 30}}},
		Endpoints: []shared.EndpointSpec{ep("127.0.55.1:9155", "r1", "s1"), ep("127.0.55.2:9155", "r1", "s1"),
			ep("127.0.55.3:9155", "r1", "s2"), ep("127.0.55.4:9155", "r2", "s1"), ep("127.0.55.5:9155", "r3", "s1")}}
	spec.Endpoints[1].Healthy = boolp(false)
	spec.Endpoints[2].Weight = &w4
	return loadsCase{spec, []loadsEndpoint{
		{"127.0.55.1:9155", "r1", "z1/s1", "", 16.8 / 93.8 * 100},
		{"127.0.55.2:9155", "r1", "z1/s1", "unhealthy", 0},
		{"127.0.55.3:9155", "r1", "z1/s2", "", 47 / 93.8 * 100},
		{"127.0.55.4:9155", "r2", "z1/s1", "", 30 / 93.8 * 100},
		{"127.0.55.5:9155", "r3", "z1/s1", "", 0},
	}}
}

// TestConnectDistributePerLocality: real connects through the programs
// land on each endpoint as Istio's per-locality distribute weights and
// Envoy's per-locality health say (chi-square at p = 0.001; never on an
// endpoint without a share).
func TestConnectDistributePerLocality(t *testing.T) {
	kerneltest.RequireRoot(t)
	c := distLocalityCase()
	top := &shared.Topology{Services: []shared.ServiceSpec{c.spec}}
	kerneltest.Backends(t, backendsOf(top))
	tree, err := shared.Build(top, shared.BuildOptions{Generation: 1})
	if err != nil {
		t.Fatal(err)
	}
	setup(t, tree, shared.Locality{"region": "r1", "zone": "z1", "subzone": "s1"})
	seen := map[string]int{}
	for range 4000 {
		got, err := kerneltest.Ask(c.spec.VIP)
		if err != nil {
			t.Fatalf("%s: %v", c.spec.VIP, err)
		}
		seen[got]++
	}
	checkShares(t, c, seen)
}
