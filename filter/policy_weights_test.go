package main

import (
	"fmt"
	"testing"

	"github.com/loctree/loctree/shared"
)

// weightedWasmCase is a service whose candidates from r1/z1 have unequal
// weights under policy: "plain", weights 1, 2, 5 (a z2 endpoint is no
// candidate); "panic", one priority in panic (1 healthy of 5, health 28 <
// 50) whose five hosts (two spans) weigh 1..5. shares are the weights'
// shares: Envoy's EDF schedule (EdfLoadBalancerBase, envoyproxy/envoy
// load_balancer_impl.cc at e01a970ac688) gives each host its weight in every
// W picks (W the weights' sum), for round robin by weight and for least
// request by weight / (active + 1) with nothing active (one request at a
// time).
func weightedWasmCases(policy string) []localityWasmCase {
	src := shared.Locality{"region": "r1", "zone": "z1"}
	plain := localityWasmCase{name: "plain", src: src, shares: map[string]float64{},
		spec: shared.ServiceSpec{Name: policy + "-plain", Scopes: []string{"region", "zone"}, Policy: policy}}
	for i, w := range []uint32{1, 2, 5} {
		addr := fmt.Sprintf("127.0.130.%d:80", i+1)
		plain.spec.Endpoints = append(plain.spec.Endpoints, shared.EndpointSpec{Address: addr, Weight: &w, Locality: src})
		plain.shares[addr] = float64(w) / 8
	}
	plain.spec.Endpoints = append(plain.spec.Endpoints, shared.EndpointSpec{Address: "127.0.130.9:80",
		Locality: shared.Locality{"region": "r1", "zone": "z2"}})
	panic := localityWasmCase{name: "panic", src: src, shares: map[string]float64{},
		spec: shared.ServiceSpec{Name: policy + "-panic", Scopes: []string{"region", "zone"}, Policy: policy,
			Spillover: &shared.SpilloverSpec{}}}
	for i := range 5 {
		w, h := uint32(i+1), i == 0
		addr := fmt.Sprintf("127.0.131.%d:80", i+1)
		panic.spec.Endpoints = append(panic.spec.Endpoints, shared.EndpointSpec{Address: addr, Weight: &w, Healthy: &h, Locality: src})
		panic.shares[addr] = float64(w) / 15
	}
	return []localityWasmCase{plain, panic}
}

// TestWeightedPoliciesWasm: the real filter module, in the wazero host,
// gives every candidate its weight in every W picks under round_robin and
// least_request (localityWasmPicks is a multiple of both cases' W; ±1 for
// where the schedule starts). Before, both spread evenly over the
// candidates: 2000 picks each of the plain case's three.
func TestWeightedPoliciesWasm(t *testing.T) {
	for _, policy := range []string{"round_robin", "least_request"} {
		for _, c := range weightedWasmCases(policy) {
			t.Run(policy+"/"+c.name, func(t *testing.T) {
				picks := c.run(t)
				for addr, share := range c.shares {
					want := share * localityWasmPicks
					if d := float64(picks[addr]) - want; d < -1.01 || d > 1.01 {
						t.Errorf("%s: %d picks, want %.0f ± 1 (its weight's share %.3f): %v", addr, picks[addr], want, share, picks)
					}
				}
				if len(picks) != len(c.shares) {
					t.Errorf("picks %v, want only %v", picks, c.shares)
				}
			})
		}
	}
}
