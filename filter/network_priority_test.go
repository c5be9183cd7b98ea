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

// clusterWasm is networkWasm's service with cluster for network (issue 26:
// a scope before region other than a leading network), from c1/r1/z1/s1.
// With the failover rule, Istio's failoverPriority [cluster] plus failover
// (rank × 5 + LbPriority) gives networkWasm's priorities and shares. Without
// it, failoverPriority [cluster, region, zone, subzone] puts every other
// cluster in one priority (applyFailoverPriorityPerLocality: len − 0),
// health 140·3/6 = 70, all the load; its localities across clusters weigh
// r1/z1/s1 3·min(1, 1.4·1/3) = 1.4, r1/z2/s1 2·min(1, 1.4·1/2) = 1.4 and
// r1/z3/s1 1: .3 and .5 1.4/3.8 each, .7 1/3.8 (a locality per cluster
// gives .3 1.4/3.4 and .5, .7 1/3.4).
func clusterWasm(failover bool) localityWasmCase {
	c := networkWasm()
	c.name, c.spec.Name, c.spec.Scopes = "cluster", "clu", []string{"cluster", "region", "zone", "subzone"}
	c.src = shared.Locality{"cluster": "c1", "region": "r1", "zone": "z1", "subzone": "s1"}
	for i := range c.spec.Endpoints {
		loc := c.spec.Endpoints[i].Locality
		loc["cluster"] = "c" + loc["network"][1:]
		delete(loc, "network")
	}
	if !failover {
		c.spec.Failover = nil
		c.shares = map[string]float64{"127.0.136.3:80": 1.4 / 3.8, "127.0.136.5:80": 1.4 / 3.8, "127.0.136.7:80": 1 / 3.8}
	}
	return c
}

// TestClusterPrioritiesWasm: the real filter module spreads the picks of a
// spillover service with cluster before region as Istio's priorities and
// Envoy's localities across clusters say, with the failover rule and
// without (chi-square at z = 4).
func TestClusterPrioritiesWasm(t *testing.T) {
	for _, failover := range []bool{true, false} {
		t.Run(fmt.Sprintf("failover=%v", failover), func(t *testing.T) {
			c := clusterWasm(failover)
			checkPickShares(t, c.run(t), c.shares, "Istio and Envoy")
		})
	}
}
