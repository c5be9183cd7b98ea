package shared

import (
	"fmt"
	"testing"
)

// issue26PanicTopology is issue 26 item 1: scopes [region], spillover with
// panic_threshold 60, six endpoints in r3 (.1 .3 .4 unhealthy, .2
// degraded, .5 .6 healthy); from region=r3 the one priority is in panic.
func issue26PanicTopology(policy string) *Topology {
	f, hl := false, uint32(60)
	eps := make([]EndpointSpec, 6)
	for i := range eps {
		eps[i] = EndpointSpec{Address: fmt.Sprintf("127.0.60.%d:80", i+1), Locality: Locality{"region": "r3"}}
	}
	for _, i := range []int{0, 2, 3} {
		eps[i].Healthy = &f
	}
	eps[1].Degraded = true
	return &Topology{Services: []ServiceSpec{{
		Name: "panic", Scopes: []string{"region"}, Policy: policy,
		Spillover: &SpilloverSpec{PanicThreshold: &hl}, Endpoints: eps,
	}}}
}

// TestPanicPicksAmongAllHosts: a priority in panic picks among all its
// hosts, whatever the policy. Envoy's ZoneAwareLoadBalancerBase::
// hostSourceToUse (source/extensions/load_balancing_policies/common/
// load_balancer_impl.cc at envoyproxy/envoy 00cf9a05) returns
// HostsSource::SourceType::AllHosts when per_priority_panic_ is set for the
// chosen priority, before any locality or policy, and hostSourceToHosts
// gives host_set.hosts(): all six. With no request in flight and equal
// weights every policy then spreads evenly: the oracle's (priorityOracle)
// panic list, each 1/6. Issue 26 item 1: least_connections sent all 6000
// picks to 127.0.60.5.
func TestPanicPicksAmongAllHosts(t *testing.T) {
	for _, policy := range policyNames {
		t.Run(policy, func(t *testing.T) {
			top := issue26PanicTopology(policy)
			tree := mustBuild(t, top)
			svc := tree.Services()[0]
			src := Locality{"region": "r3"}
			want := priorityOracle(&top.Services[0], src, DefaultOverprovisioningFactor, 60)
			if len(want) != 1 || !want[0].panic || len(want[0].all) != 6 {
				t.Fatalf("oracle: %+v", want)
			}
			l := svc.Loads(src)
			p := NewPicker(tree, PickerOptions{Seed: 26})
			const n = 6000
			counts := map[string]int{}
			for i := range n {
				ep, ok := p.PickLoads(svc, &l, HashKey(fmt.Sprint("client-", i)))
				if !ok {
					t.Fatalf("pick %d: none", i)
				}
				counts[addrsOf(tree, []Span{{ep, ep + 1}})[0]]++
			}
			var chi2 float64
			exp := float64(n) / float64(len(want[0].all))
			for _, a := range want[0].all {
				d := float64(counts[a]) - exp
				chi2 += d * d / exp
			}
			if limit := chi2AtZ(len(want[0].all)-1, 4.75); chi2 > limit || len(counts) != 6 {
				t.Fatalf("picks %v: chi-square %.1f > %.1f (Envoy: all hosts, 1/6 each)", counts, chi2, limit)
			}
		})
	}
}
