package kernel

import (
	"fmt"
	"testing"

	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/shared"
)

// localityCases are spillover services where istiod turns locality
// weighted LB on (failover rules: istio/istio loadbalancer.go
// ApplyToCluster at 86c9f01f), with shares for the source r1/z1/s1 worked
// by hand from Envoy's effectiveLocalityWeight (source/common/upstream/
// locality_wrr.cc at e8e02bb2: weight · min(1, 1.4 · healthy/hosts), the
// weight the sum of the locality's endpoint weights as istiod's
// endpoint_builder.go sends it), not by loctree:
//
//   - issue: issue 26 item 2's example. P0 (s1) has one unhealthy endpoint:
//     health 0; P1 (z1 without s1): s2 one healthy (.2), s3 three healthy
//     and one unhealthy: health min(100, 140·4/5) = 100, all the load. s2's
//     effective weight 1·min(1, 1.4) = 1, s3's 4·min(1, 1.4·3/4) = 4: .2
//     gets 20 %, .3-.5 80/3 % each.
//   - wrr: Envoy's locality_wrr_test.cc UnhealthyFailover with two of A's
//     five hosts healthy (A weight 1 per endpoint, 5; B one endpoint of
//     weight 10: 1:2). P0 (s1) empty; P1 (z1): nothing; the one priority is
//     region r1 (zones A and B): 3 healthy of 6, health 70, all the load,
//     not in panic (50 % is not below 50 %). A: 5·min(1, 1.4·2/5) = 2.8,
//     B: 10: A's two healthy endpoints 2.8/12.8/2 = 10.9375 % each, B
//     78.125 %.
func localityCases() []loadsCase {
	of, threshold := uint32(140), uint32(50)
	mk := func(name, vip string, eps []loadsEndpoint, weights map[string]uint32) loadsCase {
		spec := shared.ServiceSpec{Name: name, VIP: vip, Failover: []shared.FailoverSpec{{From: "r1", To: "r2"}},
			Spillover: &shared.SpilloverSpec{OverprovisioningFactor: &of, PanicThreshold: &threshold}}
		for _, e := range eps {
			zone, sub := e.zone[:2], e.zone[3:]
			es := shared.EndpointSpec{Address: e.addr, Locality: shared.Locality{"region": e.region, "zone": zone, "subzone": sub}}
			if e.health == "unhealthy" {
				es.Healthy = boolp(false)
			}
			if w, ok := weights[e.addr]; ok {
				es.Weight = &w
			}
			spec.Endpoints = append(spec.Endpoints, es)
		}
		return loadsCase{spec, eps}
	}
	issue := mk("issue", "127.77.26.1:80", []loadsEndpoint{
		{"127.0.26.1:9126", "r1", "z1/s1", "unhealthy", 0},
		{"127.0.26.2:9126", "r1", "z1/s2", "", 20},
		{"127.0.26.3:9126", "r1", "z1/s3", "", 80.0 / 3}, {"127.0.26.4:9126", "r1", "z1/s3", "", 80.0 / 3},
		{"127.0.26.5:9126", "r1", "z1/s3", "", 80.0 / 3}, {"127.0.26.6:9126", "r1", "z1/s3", "unhealthy", 0},
		{"127.0.26.7:9126", "r2", "z1/s1", "", 0},
	}, nil)
	var wrrEps []loadsEndpoint
	for i := range 5 {
		e := loadsEndpoint{fmt.Sprintf("127.0.27.%d:9127", i+1), "r1", "zA/s1", "unhealthy", 0}
		if i < 2 {
			e.health, e.share = "", 2.8/12.8*100/2
		}
		wrrEps = append(wrrEps, e)
	}
	wrrEps = append(wrrEps, loadsEndpoint{"127.0.27.9:9127", "r1", "zB/s1", "", 10.0 / 12.8 * 100})
	wrr := mk("wrr", "127.77.26.2:80", wrrEps, map[string]uint32{"127.0.27.9:9127": 10})
	return []loadsCase{issue, wrr}
}

// TestConnectLocalityWeighted: real connects through the programs land on
// each endpoint as Envoy's locality weighted choice inside the priority
// says (chi-square at p = 1e-5, chi2Crit; never on an endpoint without a share).
// Before bpf/lib/locality.h the kernel spread the priority's healthy
// endpoints evenly (issue: 25 % each).
func TestConnectLocalityWeighted(t *testing.T) {
	kerneltest.RequireRoot(t)
	cases := localityCases()
	install(t, specsOf(cases, loadsCase.specOf), shared.Locality{"region": "r1", "zone": "z1", "subzone": "s1"})
	connectShares(t, cases...)
}
