package kernel

import (
	"errors"
	"fmt"
	"slices"
	"syscall"
	"testing"

	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/shared"
)

// loadsEndpoint is an endpoint of the connect test: its address, zone
// (region r1 unless the zone says otherwise) and health.
type loadsEndpoint struct {
	addr, region, zone string
	health             string // "", "degraded" or "unhealthy"
	share              float64
}

// loadsCase is a service and the share of the connects each of its
// endpoints should get, in percent.
type loadsCase struct {
	spec shared.ServiceSpec
	eps  []loadsEndpoint
}

func (c loadsCase) specOf() shared.ServiceSpec { return c.spec }

func spillService(name, vip string, failover []shared.FailoverSpec, eps []loadsEndpoint) loadsCase {
	of, threshold := uint32(140), uint32(50)
	spec := shared.ServiceSpec{Name: name, VIP: vip, Scopes: []string{"region", "zone"}, Failover: failover,
		Spillover: &shared.SpilloverSpec{OverprovisioningFactor: &of, PanicThreshold: &threshold}}
	for _, e := range eps {
		es := ep(e.addr, e.region, e.zone)
		switch e.health {
		case "degraded":
			es.Degraded = true
		case "unhealthy":
			es.Healthy = boolp(false)
		}
		spec.Endpoints = append(spec.Endpoints, es)
	}
	return loadsCase{spec, eps}
}

// loadsCases are services whose per-endpoint shares for the source r1/z1
// are worked out by hand from Envoy's load_balancer_impl.cc
// (recalculatePerPriorityState, recalculatePerPriorityPanic,
// choosePriority, hostSourceToUse; overprovisioning factor 140, panic
// threshold 50) and Istio's applyLocalityFailover
// (pilot/pkg/networking/core/loadbalancer/loadbalancer.go), not by loctree:
//
//   - spill: P0 (r1/z1) 2 healthy of 5: health 140·2/5 = 56; P1 (r1/z2) 2 of 2:
//     100; P2 (r2) 100. Normalized total min(100, 256) = 100, so the healthy
//     loads are 56, 44, 0: 28 % to each P0 healthy endpoint, 22 % to each of P1.
//   - degraded: P0 only, 1 healthy, 3 degraded and 1 unhealthy: health
//     140·1/5 = 28, degraded 140·3/5 = 84; normalized total min(100, 112) =
//     100: healthy load 28, degraded load min(72, 84) = 72 over the three
//     degraded endpoints.
//   - panic: P0 1 healthy of 5: health 28, and 20 % < 50 %: in panic; P1 1 of
//     2: health 70, 50 % is not below 50 %. Total 98 < 100, so panic applies:
//     loads 28·100/98 = 28 and 70·100/98 = 71, the remainder 1 to P0: 29 %
//     over all five P0 endpoints (panic uses every host), 71 % to P1's
//     healthy one, none to its unhealthy one.
//   - failover: no endpoint in r1; the rule r1 → r2 makes r2 priority 0 and r4
//     priority 1; r2 is fully healthy: all traffic to r2.
//   - distribute: the rule from r1/z1 to {r1/z2: 80, r2: 20} (Istio's
//     applyLocalityWeights) drops r1/z1's endpoints, keeps every other at
//     priority 0 and weighs the localities 80 and 20 (one locality each,
//     endpoint weights 1: ceil(80·2/2), ceil(20·2/2)). P0: 3 healthy of 4,
//     health min(100, 140·3/4) = 100: no panic, healthy load 100. Envoy's
//     effectiveLocalityWeight (locality_wrr.cc): r1/z2 80·min(1, 1.4·2/2) =
//     80, r2/z3 20·min(1, 1.4·1/2) = 14: r1/z2 gets 80/94 (40/94 per
//     endpoint), r2's healthy endpoint 14/94.
func loadsCases() []loadsCase {
	return []loadsCase{
		spillService("spill", "127.77.1.1:80", nil, []loadsEndpoint{
			{"127.0.11.1:9101", "r1", "z1", "", 28}, {"127.0.11.2:9101", "r1", "z1", "", 28},
			{"127.0.11.3:9101", "r1", "z1", "unhealthy", 0}, {"127.0.11.4:9101", "r1", "z1", "unhealthy", 0},
			{"127.0.11.5:9101", "r1", "z1", "unhealthy", 0},
			{"127.0.11.6:9101", "r1", "z2", "", 22}, {"127.0.11.7:9101", "r1", "z2", "", 22},
			{"127.0.11.8:9101", "r2", "z3", "", 0},
		}),
		spillService("degraded", "127.77.1.2:80", nil, []loadsEndpoint{
			{"127.0.12.1:9102", "r1", "z1", "", 28}, {"127.0.12.2:9102", "r1", "z1", "degraded", 24},
			{"127.0.12.3:9102", "r1", "z1", "degraded", 24}, {"127.0.12.4:9102", "r1", "z1", "degraded", 24},
			{"127.0.12.5:9102", "r1", "z1", "unhealthy", 0},
		}),
		spillService("panic", "127.77.1.3:80", nil, []loadsEndpoint{
			{"127.0.13.1:9103", "r1", "z1", "", 29.0 / 5}, {"127.0.13.2:9103", "r1", "z1", "unhealthy", 29.0 / 5},
			{"127.0.13.3:9103", "r1", "z1", "unhealthy", 29.0 / 5}, {"127.0.13.4:9103", "r1", "z1", "unhealthy", 29.0 / 5},
			{"127.0.13.5:9103", "r1", "z1", "unhealthy", 29.0 / 5},
			{"127.0.13.6:9103", "r1", "z2", "", 71}, {"127.0.13.7:9103", "r1", "z2", "unhealthy", 0},
		}),
		spillService("failover", "127.77.1.4:80", []shared.FailoverSpec{{From: "r1", To: "r2"}}, []loadsEndpoint{
			{"127.0.14.1:9104", "r2", "z1", "", 50}, {"127.0.14.2:9104", "r2", "z1", "", 50},
			{"127.0.14.3:9104", "r4", "z1", "", 0}, {"127.0.14.4:9104", "r4", "z1", "", 0},
		}),
		distributeCase(),
	}
}

func distributeCase() loadsCase {
	c := spillService("distribute", "127.77.1.7:80", nil, []loadsEndpoint{
		{"127.0.16.1:9106", "r1", "z1", "", 0}, {"127.0.16.2:9106", "r1", "z1", "", 0},
		{"127.0.16.3:9106", "r1", "z2", "", 4000.0 / 94}, {"127.0.16.4:9106", "r1", "z2", "", 4000.0 / 94},
		{"127.0.16.5:9106", "r2", "z3", "", 1400.0 / 94}, {"127.0.16.6:9106", "r2", "z3", "unhealthy", 0},
	})
	c.spec.Distribute = []shared.DistributeSpec{{From: "r1/z1", To: map[string]uint32{"r1/z2": 80, "r2": 20}}}
	return c
}

// TestConnectLoadsFrequencies: real connects through the programs attached
// to a child cgroup land on each endpoint as often as Envoy's priority load
// says (chi-square at p = 1e-5 over the endpoints with a share; never on
// an endpoint without one), for a spillover, a degraded, a panic, a
// failover and a distribute case; connects beyond a failover_limit are refused. The kernel
// before bpf/lib/priority.h served these services all-or-nothing (only the
// deepest healthy match) and fails this test.
func TestConnectLoadsFrequencies(t *testing.T) {
	kerneltest.RequireRoot(t)
	cases := loadsCases()
	top := specsOf(cases, loadsCase.specOf)
	// Beyond failover_limit: no endpoint in the source's region r1, so no
	// candidate, with and without spillover: the connect is refused.
	for i, spill := range []bool{false, true} {
		b := spillService(fmt.Sprintf("bounded-%d", i), fmt.Sprintf("127.77.1.%d:80", 5+i), nil, []loadsEndpoint{
			{fmt.Sprintf("127.0.15.%d:9105", 1+i), "r2", "z1", "", 0}})
		b.spec.FailoverLimit = "region"
		if !spill {
			b.spec.Spillover = nil
		}
		top.Services = append(top.Services, b.spec)
	}
	install(t, top, shared.Locality{"region": "r1", "zone": "z1"})
	connectSharesN(t, 3000, cases...)
	for _, vip := range []string{"127.77.1.5:80", "127.77.1.6:80"} {
		if got, err := kerneltest.Ask(vip); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("%s beyond failover_limit: got %q, %v; want ECONNREFUSED", vip, got, err)
		}
	}
}

// chi2Crit are chi-square critical values at p = 1e-5 by degrees of
// freedom (the upper tail of the chi-square distribution, Q(df/2, x/2) =
// 1e-5; at p = 0.001 the same computation gives NIST/SEMATECH's table,
// e-Handbook 1.3.6.7.4, to three decimals). At p = 0.001 the ~15 cases of
// the kernel tests that use it fail a correct kernel in about 1.5 % of
// runs (a stress run of 6 rounds saw distribute at 17.1 > 13.8). The bugs
// they guard stay far above p = 1e-5: an all-or-nothing kernel gives
// chi-square in the thousands, and the even spread of issue 26 item 2
// (25 % each where Envoy gives 20 / 26.7 %) gives 62.5 at 4,000 connects
// (limit 25.9, 3 df).
var chi2Crit = map[int]float64{1: 19.511, 2: 23.026, 3: 25.902, 4: 28.473, 5: 30.856, 6: 33.107}

func checkShares(t *testing.T, c loadsCase, seen map[string]int) {
	t.Helper()
	total, chi2, df := 0, 0.0, -1
	for _, n := range seen {
		total += n
	}
	for _, e := range c.eps {
		if e.share == 0 {
			if seen[e.addr] != 0 {
				t.Fatalf("%s: %d connects to %s, which has no load: %v", c.spec.Name, seen[e.addr], e.addr, seen)
			}
			continue
		}
		want := float64(total) * e.share / 100
		d := float64(seen[e.addr]) - want
		chi2 += d * d / want
		df++
	}
	if chi2 > chi2Crit[df] {
		t.Fatalf("%s: chi-square %.1f > %.1f (df %d): counts %v", c.spec.Name, chi2, chi2Crit[df], df, seen)
	}
	t.Logf("%s: chi-square %.2f (df %d, critical %.1f): %v", c.spec.Name, chi2, df, chi2Crit[df], seen)
}

// TestKernelCountsPicksPerPriority: the kernel counts every new pick of a
// spillover service under the priority and availability it drew, so
// lt_prio_picks (loctree_kernel_priority_picks_total) shows the per-priority
// spread. From r1/z1: P0 (z1) has 1 healthy, 1 degraded and 2 unhealthy
// endpoints, P1 (z2) 2 healthy, P2 (r2) 1 healthy; loads 35 / 65 / 0 healthy,
// 0 degraded (Envoy's priority load, factor 140, worked by hand). Every
// connect lands on an endpoint of the priority counted for it, so the
// counts equal the connects per priority exactly.
func TestKernelCountsPicksPerPriority(t *testing.T) {
	kerneltest.RequireRoot(t)
	c := spillService("counted", "127.77.1.9:80", nil, []loadsEndpoint{
		{"127.0.19.1:9109", "r1", "z1", "", 0}, {"127.0.19.2:9109", "r1", "z1", "degraded", 0},
		{"127.0.19.3:9109", "r1", "z1", "unhealthy", 0}, {"127.0.19.4:9109", "r1", "z1", "unhealthy", 0},
		{"127.0.19.5:9109", "r1", "z2", "", 0}, {"127.0.19.6:9109", "r1", "z2", "", 0},
		{"127.0.19.7:9109", "r2", "z1", "", 0}})
	top := &shared.Topology{Services: []shared.ServiceSpec{c.spec}}
	_, in := install(t, top, shared.Locality{"region": "r1", "zone": "z1"})
	prio := map[string]int{"127.0.19.1:9109": 0, "127.0.19.5:9109": 1, "127.0.19.6:9109": 1, "127.0.19.7:9109": 2}
	want := make([]uint64, 2*3)
	// 4,000 connects: the 30-40 % bound on P0's 35 % is 6.6 standard
	// deviations wide, not 3.3 as at 1,000, where a correct kernel failed
	// about once in 1,000 runs (403 of 1,000 in one CI run).
	const connects = 4000
	for range connects {
		got, err := kerneltest.Ask(c.spec.VIP)
		if err != nil {
			t.Fatal(err)
		}
		p, ok := prio[got]
		if !ok {
			t.Fatalf("connect landed on %s, no healthy endpoint", got)
		}
		want[2*p]++
	}
	picks, err := in.k.priorityPicks()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(picks[:len(want)], want) || slices.ContainsFunc(picks[len(want):], func(v uint64) bool { return v != 0 }) {
		t.Fatalf("kernel counts %v, want %v (healthy, degraded per priority) and zero after", picks, want)
	}
	if p0 := float64(want[0]) / connects; p0 < 0.30 || p0 > 0.40 || want[4] != 0 {
		t.Fatalf("picks per priority %v: want about 35 %% at P0, 65 %% at P1, none at P2", want)
	}
}
