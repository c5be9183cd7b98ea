package main

import (
	"testing"

	"github.com/loctree/loctree/shared"
)

// distLocalityWasm is issue 26 item 5's example (shared's
// distLocalityCase), shares worked by hand from Istio's applyLocalityWeights
// (istio/istio pilot/pkg/networking/core/loadbalancer/loadbalancer.go at
// b6787c126ec0: each locality a to pattern matches gets ceil(weight · W_L /
// ΣW)) and Envoy's effectiveLocalityWeight (envoyproxy/envoy
// source/common/upstream/locality_wrr.cc at e8e02bb2: W · min(1, 1.4 ·
// healthy/hosts)), not from loctree. A rule from r1 to r1/z1 70, r2 30:
// r1/z1/s1 (.1 healthy, .2 unhealthy) 24 → 16.8; r1/z1/s2 (.3 healthy,
// weight 4) 47; r2/z1/s1 (.4) 30; r3 (.5) no target. From r1/z1/s1: .1
// 16.8/93.8, .3 47/93.8, .4 30/93.8 (per target, before: .1 and .3 35 %
// each). From r9 no rule applies, every locality keeps its weight: .1
// 1.4/7.4, .3 4/7.4, .4 and .5 1/7.4 (before: 25 % each).
func distLocalityWasm(src shared.Locality, shares map[string]float64) localityWasmCase {
	no, w4 := false, uint32(4)
	loc := func(r, s string) shared.Locality { return shared.Locality{"region": r, "zone": "z1", "subzone": s} }
	return localityWasmCase{
		name: "distloc-" + src["region"],
		spec: shared.ServiceSpec{Name: "distloc", Spillover: &shared.SpilloverSpec{},
			Distribute: []shared.DistributeSpec{{From: "r1", To: map[string]uint32{"r1/z1": 70, "r2": 30}}},
			Endpoints: []shared.EndpointSpec{
				{Address: "127.0.155.1:80", Locality: loc("r1", "s1")},
				{Address: "127.0.155.2:80", Locality: loc("r1", "s1"), Healthy: &no},
				{Address: "127.0.155.3:80", Locality: loc("r1", "s2"), Weight: &w4},
				{Address: "127.0.155.4:80", Locality: loc("r2", "s1")},
				{Address: "127.0.155.5:80", Locality: loc("r3", "s1")},
			}},
		src:    src,
		shares: shares,
	}
}

// TestDistributePerLocalityWasm: the real filter module, in the wazero
// host, spreads a distribute rule's traffic over the localities of each to
// pattern as Istio weighs them and Envoy scales them by their health, per
// endpoint, chi-square at z = 4 (p ≈ 3e-5); no pick on an endpoint without
// a share.
func TestDistributePerLocalityWasm(t *testing.T) {
	cases := []localityWasmCase{
		distLocalityWasm(shared.Locality{"region": "r1", "zone": "z1", "subzone": "s1"},
			map[string]float64{"127.0.155.1:80": 16.8 / 93.8, "127.0.155.3:80": 47 / 93.8, "127.0.155.4:80": 30 / 93.8}),
		distLocalityWasm(shared.Locality{"region": "r9"},
			map[string]float64{"127.0.155.1:80": 1.4 / 7.4, "127.0.155.3:80": 4 / 7.4, "127.0.155.4:80": 1 / 7.4, "127.0.155.5:80": 1 / 7.4}),
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkPickShares(t, c.run(t), c.shares, "Istio+Envoy")
		})
	}
}
