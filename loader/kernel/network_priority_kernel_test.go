package kernel

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/shared"
)

// networkPriorityCase is a spillover service with network first and a
// failover rule r1 → r2 (issue 26 items 3 and 4), for a node on n1 in
// r1/z1/s1; the shares are worked by hand from Istio's priorities
// (istio/istio loadbalancer.go applyFailoverPriorities at b6787c12, over
// applyLocalityFailover: rank × 5 + LbPriority) and Envoy's loads and
// locality weights (load_balancer_impl.cc, locality_wrr.cc
// effectiveLocalityWeight; factor 140, panic 50), not by loctree:
//
//   - P0 n1 r1/z1/s1: .1 unhealthy; P1 n1, a region other than r2: .2
//     unhealthy; both health 0;
//   - P2 the other networks in r1/z1/s1: .3 healthy, .4 and .8 unhealthy:
//     health 140·1/3 = 46;
//   - P3 the other networks in r1, another zone: .5 (n2) healthy and .6
//     (n3) unhealthy in r1/z2/s1, .7 (n2) healthy in r1/z3/s1: health 93.
//
// Loads 46 and 54 (the healthy availabilities reach 100 at P3), no panic.
// P3's localities are Istio's across the other networks: r1/z2/s1 (weight
// 2, effective 2·min(1, 1.4·1/2) = 1.4) and r1/z3/s1 (1): .5 31.5 %, .7
// 22.5 %, .3 46 %. Before, the other networks were one last priority
// (.3 gets 140·3/6 = 70 % of the weight there), and weighing n2/r1/z2/s1
// apart from n3/r1/z2/s1 gives .5 and .7 27 % each (chi-square 62 at
// 4,000 connects).
func networkPriorityCase() loadsCase {
	of, threshold := uint32(140), uint32(50)
	spec := shared.ServiceSpec{Name: "net", VIP: "127.77.36.1:80", Scopes: []string{"network", "region", "zone", "subzone"},
		Failover:  []shared.FailoverSpec{{From: "r1", To: "r2"}},
		Spillover: &shared.SpilloverSpec{OverprovisioningFactor: &of, PanicThreshold: &threshold}}
	return firstScopeCase(spec, "network", "127.0.36.%d:9136", 1, []firstScopeEndpoint{
		{"n1", "r1", "z1", false, 0}, {"n1", "r3", "z1", false, 0}, {"n2", "r1", "z1", true, 46}, {"n2", "r1", "z1", false, 0},
		{"n2", "r1", "z2", true, 54 * 1.4 / 2.4}, {"n3", "r1", "z2", false, 0}, {"n2", "r1", "z3", true, 54 / 2.4}, {"n3", "r1", "z1", false, 0},
	})
}

// firstScopeEndpoint is an endpoint of firstScopeCase: its value of the
// first scope, its region and zone (subzone s1), its health and its share
// in percent.
type firstScopeEndpoint struct {
	first, region, zone string
	healthy             bool
	share               float64
}

// firstScopeCase is spec with eps as its endpoints, the first scope named
// key, endpoint i at fmt.Sprintf(addr, i+first).
func firstScopeCase(spec shared.ServiceSpec, key, addr string, first int, eps []firstScopeEndpoint) loadsCase {
	var out []caseEndpoint
	for _, e := range eps {
		out = append(out, caseEndpoint{shared.Locality{key: e.first, "region": e.region, "zone": e.zone, "subzone": "s1"}, e.healthy, e.share})
	}
	return endpointsCase(spec, addr, first, out)
}

// caseEndpoint is an endpoint of endpointsCase: its locality, its health
// and its share in percent.
type caseEndpoint struct {
	loc     shared.Locality
	healthy bool
	share   float64
}

// endpointsCase is spec with eps as its endpoints, endpoint i at
// fmt.Sprintf(addr, i+first).
func endpointsCase(spec shared.ServiceSpec, addr string, first int, eps []caseEndpoint) loadsCase {
	c := loadsCase{}
	for i, e := range eps {
		a := fmt.Sprintf(addr, i+first)
		es := shared.EndpointSpec{Address: a, Locality: e.loc}
		if !e.healthy {
			es.Healthy = boolp(false)
		}
		spec.Endpoints = append(spec.Endpoints, es)
		c.eps = append(c.eps, loadsEndpoint{addr: a, health: map[bool]string{true: "", false: "unhealthy"}[e.healthy], share: e.share})
	}
	c.spec = spec
	return c
}

// connectShares makes 4,000 real connects to each case's VIP, a subtest
// per case, and checks where they landed against its shares (checkShares).
func connectShares(t *testing.T, cases ...loadsCase) { connectSharesN(t, 4000, cases...) }

// connectSharesN is connectShares with connects connects per case.
func connectSharesN(t *testing.T, connects int, cases ...loadsCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.spec.Name, func(t *testing.T) {
			seen := map[string]int{}
			for range connects {
				got, err := kerneltest.Ask(c.spec.VIP)
				if err != nil {
					t.Fatalf("%s: %v", c.spec.VIP, err)
				}
				seen[got]++
			}
			checkShares(t, c, seen)
		})
	}
}

// TestConnectNetworkPriorities: real connects through the programs from a
// node on n1 land on each endpoint as Istio's priorities across networks
// and Envoy's locality weights say (chi-square at p = 1e-5, chi2Crit; never
// on an endpoint without a share).
func TestConnectNetworkPriorities(t *testing.T) {
	kerneltest.RequireRoot(t)
	c := networkPriorityCase()
	install(t, specsOf([]loadsCase{c}, loadsCase.specOf), shared.Locality{"network": "n1", "region": "r1", "zone": "z1", "subzone": "s1"})
	connectShares(t, c)
}

// clusterPriorityCase is a spillover service with cluster before region
// and no failover rules (failoverPriority [cluster, region, zone, subzone]
// in Istio's terms), for a node in c1 r1/z1/s1; the shares are worked by
// hand from Istio's priorities (applyFailoverPriorityPerLocality at
// b6787c12: len − j for the first label j that differs) and Envoy's loads
// and locality weights (factor 140, panic 50), not by loctree:
//
//   - P0 c1 r1/z1/s1: .1 unhealthy; P1 c1, another region: .2 unhealthy;
//     both health 0 (in panic, without load);
//   - P2 every other cluster: .3 (c2) healthy, .4 (c2) and .8 (c3)
//     unhealthy in r1/z1/s1; .5 (c2) healthy and .6 (c3) unhealthy in
//     r1/z2/s1; .7 (c2) healthy in r1/z3/s1: health 140·3/6 = 70, all
//     the load, not in panic (100·3 is not below 50·6).
//
// P2's localities are istiod's, across clusters: r1/z1/s1 weight 3,
// effective 3·min(1, 1.4·1/3) = 1.4; r1/z2/s1 2·min(1, 1.4·1/2) = 1.4;
// r1/z3/s1 1: .3 and .5 1.4/3.8 = 36.8 % each, .7 26.3 %. A locality
// per cluster (the tree without the copies by the first scope) gives .3
// 1.4/3.4 = 41.2 %, .5 and .7 29.4 % each.
//
// With the failover rule r1 → r2 (clusterFailoverCase), Istio's
// failoverPriority [cluster] with the rule (rank × 5 + LbPriority) gives
// networkPriorityCase's priorities with cluster for network: .3 46 %,
// .5 31.5 %, .7 22.5 %.
func clusterPriorityCase() loadsCase { return clusterCase(false) }

func clusterFailoverCase() loadsCase { return clusterCase(true) }

func clusterCase(failover bool) loadsCase {
	of, threshold := uint32(140), uint32(50)
	spec := shared.ServiceSpec{Name: "clu", VIP: "127.77.37.1:80", Scopes: []string{"cluster", "region", "zone", "subzone"},
		Spillover: &shared.SpilloverSpec{OverprovisioningFactor: &of, PanicThreshold: &threshold}}
	eps := []firstScopeEndpoint{
		{"c1", "r1", "z1", false, 0}, {"c1", "r3", "z1", false, 0}, {"c2", "r1", "z1", true, 100 * 1.4 / 3.8}, {"c2", "r1", "z1", false, 0},
		{"c2", "r1", "z2", true, 100 * 1.4 / 3.8}, {"c3", "r1", "z2", false, 0}, {"c2", "r1", "z3", true, 100 / 3.8}, {"c3", "r1", "z1", false, 0},
	}
	if failover {
		spec.Name, spec.VIP, spec.Failover = "clufo", "127.77.37.2:80", []shared.FailoverSpec{{From: "r1", To: "r2"}}
		eps[2].share, eps[4].share, eps[6].share = 46, 54*1.4/2.4, 54/2.4
	}
	return firstScopeCase(spec, "cluster", "127.0.37.%d:9137", map[bool]int{false: 1, true: 11}[failover], eps)
}

// TestConnectClusterPriorities: real connects through the programs from a
// node in c1 land on each endpoint as Istio's priorities and Envoy's
// locality weights across clusters say, without and with the failover rule (chi-square at p = 1e-5, chi2Crit;
// never on an endpoint without a share).
func TestConnectClusterPriorities(t *testing.T) {
	kerneltest.RequireRoot(t)
	cases := []loadsCase{clusterPriorityCase(), clusterFailoverCase()}
	install(t, specsOf(cases, loadsCase.specOf), shared.Locality{"cluster": "c1", "region": "r1", "zone": "z1", "subzone": "s1"})
	connectShares(t, cases...)
}

// TestOtherNetworkLabelMatchesHeader: the kernel's label of the copies
// for a network no endpoint is on is shared's.
func TestOtherNetworkLabelMatchesHeader(t *testing.T) {
	h, err := os.ReadFile("../../bpf/lib/loads.h")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^#define LT_OTHER_NETWORK\s+(0x[0-9a-f]+)ULL\b`).FindSubmatch(h)
	if m == nil {
		t.Fatal("no #define LT_OTHER_NETWORK in loads.h")
	}
	if got, err := strconv.ParseUint(string(m[1]), 0, 64); err != nil || got != shared.OtherNetworkLabel() {
		t.Fatalf("LT_OTHER_NETWORK %s, shared %#x", m[1], shared.OtherNetworkLabel())
	}
}

// classPriorityCase is a spillover service with network and cluster before
// region and a failover rule r1 → r2 (Istio's failoverPriority [network,
// cluster] with failover, docs/FORMAT.md "Classes before the locality"),
// for a node on n1 in c1 r1/z1/s1; the shares are worked by hand from
// Istio's priorities (applyFailoverPriorityPerLocality at b6787c12: len − j
// for the first label j that differs, the list's length more for another
// network, "ignore network"; × 5 + LbPriority, applyLocalityFailover) and
// Envoy's loads (factor 140, panic 50), not by loctree:
//
//   - .1 n1 c1 r1/z1/s1 unhealthy: 0·5 + 0 = 0, P0, health 0;
//   - .2 healthy, .6 and .7 unhealthy, n1 c2 r1/z1/s1: 4·5 + 0 = 20, P1,
//     health 140·1/3 = 46;
//   - .3 n1 c3 r1/z2/s1 unhealthy: 4·5 + 2 = 22, P2, health 0;
//   - .4 healthy, .8 and .9 unhealthy, n2 c1 r1/z1/s1: (5 + 0)·5 + 0 =
//     25, P3, health 46;
//   - .5 n2 c2 and .10 n3 c3, both healthy in r1/z1/s1: (5 + 4)·5 + 0 =
//     45, P4, health 100.
//
// The healthy availabilities reach 100 at P4: .2 46 %, .4 46 %, .5 and
// .10 4 % each (one locality r1/z1/s1 across n2/c2 and n3/c3, weights 1
// and 1). Before the classes, Build refused the scopes with failover
// rules; ranking n1's other clusters in one rank with the other networks'
// (cluster as any scope after network) puts .2, .3 after .4.
func classPriorityCase() loadsCase {
	of, threshold := uint32(140), uint32(50)
	spec := shared.ServiceSpec{Name: "cls", VIP: "127.77.38.1:80", Scopes: []string{"network", "cluster", "region", "zone", "subzone"},
		Failover:  []shared.FailoverSpec{{From: "r1", To: "r2"}},
		Spillover: &shared.SpilloverSpec{OverprovisioningFactor: &of, PanicThreshold: &threshold}}
	var eps []caseEndpoint
	for _, e := range []struct {
		network, cluster, zone string
		healthy                bool
		share                  float64
	}{
		{"n1", "c1", "z1", false, 0}, {"n1", "c2", "z1", true, 46}, {"n1", "c3", "z2", false, 0}, {"n2", "c1", "z1", true, 46},
		{"n2", "c2", "z1", true, 4}, {"n1", "c2", "z1", false, 0}, {"n1", "c2", "z1", false, 0}, {"n2", "c1", "z1", false, 0},
		{"n2", "c1", "z1", false, 0}, {"n3", "c3", "z1", true, 4},
	} {
		loc := shared.Locality{"network": e.network, "cluster": e.cluster, "region": "r1", "zone": e.zone, "subzone": "s1"}
		eps = append(eps, caseEndpoint{loc, e.healthy, e.share})
	}
	return endpointsCase(spec, "127.0.38.%d:9138", 1, eps)
}

// TestConnectClassPriorities: real connects through the programs from a
// node on n1 in c1 land on each endpoint as Istio's priorities by class
// before the locality and Envoy's loads say (classPriorityCase).
func TestConnectClassPriorities(t *testing.T) {
	kerneltest.RequireRoot(t)
	c := classPriorityCase()
	install(t, specsOf([]loadsCase{c}, loadsCase.specOf), shared.Locality{"network": "n1", "cluster": "c1", "region": "r1", "zone": "z1", "subzone": "s1"})
	connectShares(t, c)
}
