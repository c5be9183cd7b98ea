package main

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/loctree/loctree/host"
	"github.com/loctree/loctree/shared"
)

// localityWasmCase is a spillover service where istiod turns Envoy's
// locality weighted LB on (a failover rule with outlier detection: istio/
// istio pilot/pkg/networking/core/loadbalancer/loadbalancer.go
// ApplyToCluster at 86c9f01fd735), a source, and the share of its traffic
// each endpoint gets, worked by hand from Envoy, not from loctree: the
// priority's load goes to a locality by effectiveLocalityWeight, weight ·
// min(1, factor/100 · healthy/hosts) (envoyproxy/envoy
// source/common/upstream/locality_wrr.cc at e8e02bb2f613), the weight the
// sum of the locality's endpoint weights (istio/istio pilot/pkg/xds/
// endpoints/endpoint_builder.go generate at 86c9f01fd735), then evenly
// inside it (random).
type localityWasmCase struct {
	name   string
	spec   shared.ServiceSpec
	src    shared.Locality
	shares map[string]float64 // address → share (0..1); any other address: none
}

// issue26Wasm is issue 26 item 2's example: scopes [region, zone,
// subzone], spillover {}, failover r1→r2, from r1/z1/s1. P0 (s1: one
// unhealthy endpoint) has health 0; P1 (z1 without s1) 4 healthy of 5,
// health min(100, 140·4/5) = 100: all the load. s2 (one healthy, .2) has
// effective weight 1·min(1, 1.4·1/1) = 1, s3 (.3–.5 healthy, .6 not)
// 4·min(1, 1.4·3/4) = 4: .2 gets 1/5, .3–.5 4/5/3 each.
func issue26Wasm() localityWasmCase {
	no := false
	loc := func(r, s string) shared.Locality { return shared.Locality{"region": r, "zone": "z1", "subzone": s} }
	return localityWasmCase{
		name: "issue",
		spec: shared.ServiceSpec{Name: "issue", Spillover: &shared.SpilloverSpec{},
			Failover: []shared.FailoverSpec{{From: "r1", To: "r2"}},
			Endpoints: []shared.EndpointSpec{
				{Address: "127.0.126.1:80", Locality: loc("r1", "s1"), Healthy: &no},
				{Address: "127.0.126.2:80", Locality: loc("r1", "s2")},
				{Address: "127.0.126.3:80", Locality: loc("r1", "s3")},
				{Address: "127.0.126.4:80", Locality: loc("r1", "s3")},
				{Address: "127.0.126.5:80", Locality: loc("r1", "s3")},
				{Address: "127.0.126.6:80", Locality: loc("r1", "s3"), Healthy: &no},
				{Address: "127.0.126.7:80", Locality: loc("r2", "s1")},
			}},
		src: loc("r1", "s1"),
		shares: map[string]float64{"127.0.126.2:80": 0.2,
			"127.0.126.3:80": 0.8 / 3, "127.0.126.4:80": 0.8 / 3, "127.0.126.5:80": 0.8 / 3},
	}
}

// unhealthyFailoverWasm is Envoy's test/common/upstream/locality_wrr_test.cc
// UnhealthyFailover (at e8e02bb2f613): locality A five hosts, B one, weights
// {1, 2}, factor 140 (kDefaultOverProvisioningFactor); with `healthy` of
// A's hosts healthy, Envoy's 100 picks give A 33, 33, 29, 22, 12, 0 for 5 to
// 0. Istio's locality weight is the sum of its endpoints' weights: A's five
// weigh 1 each (5) and B's one 10, the test's 1:2. A and B are zones of the
// source's region r0 (the source in a third zone C), so they make one
// priority; panic_threshold 0 keeps it out of panic however few are healthy
// (the Envoy test has no priorities). A's share is 5·min(1, 1.4·h/5) /
// (that + 10), evenly over its h healthy hosts.
func unhealthyFailoverWasm(healthy int) localityWasmCase {
	zero, w1, w10 := uint32(0), uint32(1), uint32(10)
	c := localityWasmCase{
		name: fmt.Sprintf("UnhealthyFailover/%d", healthy),
		spec: shared.ServiceSpec{Name: fmt.Sprintf("wrr%d", healthy), Spillover: &shared.SpilloverSpec{PanicThreshold: &zero},
			Failover: []shared.FailoverSpec{{From: "r0", To: "r9"}}},
		src:    shared.Locality{"region": "r0", "zone": "C", "subzone": "s"},
		shares: map[string]float64{},
	}
	effA := 5 * min(1, 1.4*float64(healthy)/5)
	for i := range 5 {
		h := i < healthy
		addr := fmt.Sprintf("127.0.127.%d:80", i+1)
		c.spec.Endpoints = append(c.spec.Endpoints, shared.EndpointSpec{Address: addr, Weight: &w1, Healthy: &h,
			Locality: shared.Locality{"region": "r0", "zone": "A", "subzone": "s"}})
		if h {
			c.shares[addr] = effA / (effA + 10) / float64(healthy)
		}
	}
	c.spec.Endpoints = append(c.spec.Endpoints, shared.EndpointSpec{Address: "127.0.127.100:80", Weight: &w10,
		Locality: shared.Locality{"region": "r0", "zone": "B", "subzone": "s"}})
	c.shares["127.0.127.100:80"] = 10 / (effA + 10)
	return c
}

const localityWasmPicks = 6000

// TestLocalityWeightedWasm: the real filter module, in the wazero host,
// spreads a priority's picks over its localities as Envoy's locality
// weighted LB does where istiod enables it: issue 26 item 2's example and
// Envoy's UnhealthyFailover vectors, per endpoint, chi-square at the
// z = 4 critical value (p ≈ 3e-5); no pick on an endpoint without a share.
// Without the locality draw the issue's four healthy endpoints get 25 %
// each (chi-square ≈ 100 on 6000 picks, limit 24.5).
func TestLocalityWeightedWasm(t *testing.T) {
	cases := []localityWasmCase{issue26Wasm(), unhealthyFailoverWasm(3), unhealthyFailoverWasm(2), unhealthyFailoverWasm(1)}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkPickShares(t, c.run(t), c.shares, "Envoy")
		})
	}
}

// checkPickShares tests localityWasmPicks picks against shares, the
// fractions whose rules give: chi-square at the z = 4 critical value, and
// no pick on an address without a share.
func checkPickShares(t *testing.T, picks map[string]int, shares map[string]float64, whose string) {
	t.Helper()
	chi2, df := 0.0, -1
	for addr, share := range shares {
		e := share * localityWasmPicks
		chi2 += (float64(picks[addr]) - e) * (float64(picks[addr]) - e) / e
		df++
	}
	for addr, n := range picks {
		if shares[addr] == 0 {
			t.Errorf("%d picks of %s, which %s gives no share", n, addr, whose)
		}
	}
	if df > 0 && chi2 > chi2Critical(df, 4) {
		t.Errorf("picks %v, %s's shares %v: chi-square %.1f > %.1f (df %d)", picks, whose, shares, chi2, chi2Critical(df, 4), df)
	}
	t.Logf("picks %v (chi-square %.1f, df %d)", picks, chi2, df)
}

// run sends localityWasmPicks requests for the case's service through the
// real filter with the source's locality and counts the picked addresses.
func (c *localityWasmCase) run(t *testing.T) map[string]int {
	t.Helper()
	top, err := json.Marshal(&shared.Topology{Services: []shared.ServiceSpec{c.spec}})
	if err != nil {
		t.Fatal(err)
	}
	loc, _ := json.Marshal(c.src)
	h := newHost(t, fmt.Sprintf(`{"topology":%s,"locality":%s}`, top, loc), host.Options{})
	vm, err := h.NewVM(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer vm.Close()
	picks := map[string]int{}
	for range localityWasmPicks {
		res, err := vm.Do(context.Background(), &host.Request{Headers: host.Headers(req(c.spec.Name))}, nil)
		if err != nil {
			t.Fatal(err)
		}
		v, ok := res.Request.Headers.Get(defaultHeader)
		if !ok {
			t.Fatalf("request %d: no %s header", len(picks), defaultHeader)
		}
		picks[v]++
	}
	return picks
}
