package main

import (
	"fmt"
	"testing"

	"github.com/loctree/loctree/shared"
)

// networkWasm is a spillover service with network first and a failover
// rule r1 → r2 (issue 26 items 3 and 4), from n1/r1/z1/s1, with the shares
// worked by hand from Istio's priorities (istio/istio loadbalancer.go
// applyFailoverPriorities at b6787c12 over applyLocalityFailover: rank × 5
// + LbPriority) and Envoy's loads and effectiveLocalityWeight (factor 140,
// panic 50), not by loctree: n1's own endpoints (.1 in r1/z1/s1, .2 in r3)
// are unhealthy; the other networks' r1/z1/s1 (.3 healthy, .4 and .8 not)
// has health 46; their r1 in other zones (.5 healthy and .6 not in z2,
// across n2 and n3; .7 healthy in z3) 93: loads 46 and 54, and in that
// priority r1/z2/s1 weighs 2·min(1, 1.4·1/2) = 1.4 against r1/z3/s1's 1.
func networkWasm() localityWasmCase {
	no := false
	c := localityWasmCase{name: "network", src: shared.Locality{"network": "n1", "region": "r1", "zone": "z1", "subzone": "s1"},
		spec: shared.ServiceSpec{Name: "net", Scopes: []string{"network", "region", "zone", "subzone"}, Spillover: &shared.SpilloverSpec{},
			Failover: []shared.FailoverSpec{{From: "r1", To: "r2"}}},
		shares: map[string]float64{"127.0.136.3:80": 0.46, "127.0.136.5:80": 0.54 * 1.4 / 2.4, "127.0.136.7:80": 0.54 / 2.4}}
	for i, e := range []struct {
		network, region, zone string
		healthy               bool
	}{{"n1", "r1", "z1", false}, {"n1", "r3", "z1", false}, {"n2", "r1", "z1", true}, {"n2", "r1", "z1", false},
		{"n2", "r1", "z2", true}, {"n3", "r1", "z2", false}, {"n2", "r1", "z3", true}, {"n3", "r1", "z1", false}} {
		es := shared.EndpointSpec{Address: fmt.Sprintf("127.0.136.%d:80", i+1),
			Locality: shared.Locality{"network": e.network, "region": e.region, "zone": e.zone, "subzone": "s1"}}
		if !e.healthy {
			es.Healthy = &no
		}
		c.spec.Endpoints = append(c.spec.Endpoints, es)
	}
	return c
}

// TestNetworkPrioritiesWasm: the real filter module spreads the picks of a
// network-first spillover service over Istio's priorities across networks
// and Envoy's localities across those networks (chi-square at z = 4).
// Ranking network like any other scope gives .3 70 % of the last
// priority's weight, and weighing n2/r1/z2/s1 apart from n3's gives .5 and
// .7 27 % each.
func TestNetworkPrioritiesWasm(t *testing.T) {
	c := networkWasm()
	checkPickShares(t, c.run(t), c.shares, "Istio and Envoy")
}
