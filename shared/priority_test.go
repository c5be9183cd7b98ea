package shared

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/loctree/loctree/shared/wire"
)

func TestBuildValidatesSpillover(t *testing.T) {
	f := false
	svc := func(mut func(s *ServiceSpec)) *Topology {
		s := ServiceSpec{Name: "a", Spillover: &SpilloverSpec{}, Endpoints: []EndpointSpec{{Address: "127.0.0.1:80"}}}
		mut(&s)
		return &Topology{Services: []ServiceSpec{s}}
	}
	cases := []struct{ name, want string }{
		{"unhealthy and degraded", "127.0.0.1:80 is both unhealthy and degraded"},
		{"strict", "spillover needs mode failover (mode is strict)"},
		{"factor 0", "spillover overprovisioning_factor 0 (want a percent from 1 to 65535"},
		{"factor too big", "spillover overprovisioning_factor 65536"},
		{"panic 101", "spillover panic_threshold 101 (want a percent from 0 to 100"},
	}
	muts := []func(s *ServiceSpec){
		func(s *ServiceSpec) { s.Endpoints[0].Healthy, s.Endpoints[0].Degraded = &f, true },
		func(s *ServiceSpec) { s.Mode = "strict" },
		func(s *ServiceSpec) { s.Spillover.OverprovisioningFactor = u32p(0) },
		func(s *ServiceSpec) { s.Spillover.OverprovisioningFactor = u32p(65536) },
		func(s *ServiceSpec) { s.Spillover.PanicThreshold = u32p(101) },
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Build(svc(muts[i]), BuildOptions{})
			if !errors.Is(err, ErrInvalidTopology) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want ErrInvalidTopology mentioning %q", err, c.want)
			}
		})
	}
	tree, err := Build(svc(func(*ServiceSpec) {}), BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s := tree.Services()[0]; s.overprovision != 140 || s.panicThreshold != 50 {
		t.Fatalf("defaults: factor %d, panic %d; want Envoy's 140 and 50", s.overprovision, s.panicThreshold)
	}
}

// spillTopology: the source's zone (z1) has 2 healthy, 1 degraded and 7
// unhealthy endpoints, the rest of its region 4 healthy, another region 4.
func spillTopology(policy string) *Topology {
	f := false
	var eps []EndpointSpec
	add := func(n int, zone, region string, mut func(e *EndpointSpec)) {
		for range n {
			e := EndpointSpec{Address: fmt.Sprintf("127.0.9.%d:80", len(eps)+1), Locality: Locality{"region": region, "zone": zone}}
			if mut != nil {
				mut(&e)
			}
			eps = append(eps, e)
		}
	}
	add(2, "z1", "r1", nil)
	add(1, "z1", "r1", func(e *EndpointSpec) { e.Degraded = true })
	add(7, "z1", "r1", func(e *EndpointSpec) { e.Healthy = &f })
	add(4, "z2", "r1", nil)
	add(4, "z3", "r2", nil)
	return &Topology{Services: []ServiceSpec{{Name: "s", Scopes: []string{"region", "zone"}, Policy: policy, Spillover: &SpilloverSpec{}, Endpoints: eps}}}
}

// TestPickLoadsFollowsLoads picks many times and checks, by a chi-square
// test, that the share of each (priority, healthy/degraded) is its load and
// that every pick is in the set Envoy would choose from.
func TestPickLoadsFollowsLoads(t *testing.T) {
	for _, policy := range policyNames {
		t.Run(policy, func(t *testing.T) {
			tree, err := Build(spillTopology(policy), BuildOptions{})
			if err != nil {
				t.Fatal(err)
			}
			svc := tree.Services()[0]
			l := svc.Loads(Locality{"region": "r1", "zone": "z1"})
			// z1: health 140·2/10 = 28, degraded 14; z2: 100; r2: 100.
			// NTA 100: healthy 28/72/0, degraded 0 (rem 0 after healthy).
			if l.N != 3 || l.Healthy != [MaxPriorities]uint8{28, 72} || l.Degraded != [MaxPriorities]uint8{} {
				t.Fatalf("loads %+v", l)
			}
			p := NewPicker(tree, PickerOptions{Seed: 5})
			const n = 20000
			var got [MaxPriorities]float64
			rng := rand.New(rand.NewPCG(3, 4))
			for range n {
				i, ok := p.PickLoads(svc, &l, rng.Uint64())
				if !ok {
					t.Fatal("no pick")
				}
				pr := priorityOf(&l, i)
				if pr < 0 || !tree.Endpoint(i).Healthy {
					t.Fatalf("pick %d (%s) is in no priority's healthy set", i, tree.Endpoint(i).Addr)
				}
				got[pr]++
			}
			chi := 0.0
			for pr := range l.N {
				want := float64(l.Healthy[pr]) * n / 100
				if want == 0 {
					if got[pr] != 0 {
						t.Fatalf("priority %d has load 0 and %v picks", pr, got[pr])
					}
					continue
				}
				chi += (got[pr] - want) * (got[pr] - want) / want
			}
			if chi > 10.83 { // 1 degree of freedom, p = 0.001
				t.Fatalf("picks by priority %v, loads %v: chi-square %.1f", got[:l.N], l.Healthy[:l.N], chi)
			}
		})
	}
}

// priorityOf is the priority whose healthy spans hold endpoint i, or -1.
func priorityOf(l *Loads, i uint32) int {
	for p := range l.N {
		for _, s := range l.healthySpans(p) {
			if i >= s.Lo && i < s.Hi {
				return p
			}
		}
	}
	return -1
}

// TestPickLoadsPanicUsesAllHosts: with every priority in panic, picks land on
// unhealthy endpoints too, as Envoy's AllHosts source.
func TestPickLoadsPanicUsesAllHosts(t *testing.T) {
	f := false
	top := &Topology{Services: []ServiceSpec{{Name: "s", Scopes: []string{"zone"}, Spillover: &SpilloverSpec{}, Endpoints: []EndpointSpec{
		{Address: "127.0.0.1:80", Locality: Locality{"zone": "a"}},
		{Address: "127.0.0.2:80", Locality: Locality{"zone": "a"}, Healthy: &f},
		{Address: "127.0.0.3:80", Locality: Locality{"zone": "a"}, Healthy: &f},
	}}}}
	tree, err := Build(top, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc := tree.Services()[0]
	l := svc.Loads(Locality{"zone": "a"})
	if l.N != 1 || !l.InPanic(0) || l.Healthy[0] != 100 {
		t.Fatalf("loads %+v, want one priority in panic with all the load", l)
	}
	p := NewPicker(tree, PickerOptions{Seed: 1})
	seen := map[string]int{}
	for range 3000 {
		i, _ := p.PickLoads(svc, &l, 0)
		seen[tree.Endpoint(i).Addr.String()]++
	}
	for _, a := range []string{"127.0.0.1:80", "127.0.0.2:80", "127.0.0.3:80"} {
		if math.Abs(float64(seen[a])-1000) > 150 {
			t.Fatalf("panic picks %v, want about 1000 each", seen)
		}
	}
}

func TestPickLoadsRejectsForeignLoads(t *testing.T) {
	t1, _ := Build(spillTopology("random"), BuildOptions{})
	t2, _ := Build(spillTopology("random"), BuildOptions{})
	l := t1.Services()[0].Loads(Locality{})
	if _, ok := NewPicker(t2, PickerOptions{}).PickLoads(t2.Services()[0], &l, 0); ok {
		t.Fatal("loads of another tree picked")
	}
	var zero Loads
	if _, ok := NewPicker(t1, PickerOptions{}).PickLoads(t1.Services()[0], &zero, 0); ok {
		t.Fatal("zero loads picked")
	}
}

// TestPickLoadsDegradedAndPanic: zone a has 1 healthy, 1 degraded and 2
// unhealthy endpoints (health 35, degraded 35), zone b 1 healthy of 10
// (health 14, in panic). Envoy's loads: healthy 43/16, degraded 41/0; picks
// follow them, the degraded share on the degraded endpoint, and zone b's
// share on all its 10 endpoints.
func TestPickLoadsDegradedAndPanic(t *testing.T) {
	f := false
	var eps []EndpointSpec
	add := func(zone string, healthy bool, degraded bool) {
		e := EndpointSpec{Address: fmt.Sprintf("127.0.8.%d:80", len(eps)+1), Locality: Locality{"zone": zone}, Degraded: degraded}
		if !healthy {
			e.Healthy = &f
		}
		eps = append(eps, e)
	}
	add("a", true, false)
	add("a", true, true)
	add("a", false, false)
	add("a", false, false)
	add("b", true, false)
	for range 9 {
		add("b", false, false)
	}
	tree, err := Build(&Topology{Services: []ServiceSpec{{Name: "s", Scopes: []string{"zone"}, Spillover: &SpilloverSpec{}, Endpoints: eps}}}, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc := tree.Services()[0]
	l := svc.Loads(Locality{"zone": "a"})
	if l.N != 2 || l.Healthy[0] != 43 || l.Healthy[1] != 16 || l.Degraded[0] != 41 || l.Degraded[1] != 0 || l.InPanic(0) || !l.InPanic(1) {
		t.Fatalf("loads %+v", l)
	}
	p := NewPicker(tree, PickerOptions{Seed: 9})
	const n = 20000
	var aHealthy, aDegraded, b float64
	bSeen := map[string]bool{}
	for range n {
		i, _ := p.PickLoads(svc, &l, 0)
		switch a := tree.Endpoint(i).Addr.String(); a {
		case "127.0.8.1:80":
			aHealthy++
		case "127.0.8.2:80":
			aDegraded++
		case "127.0.8.3:80", "127.0.8.4:80":
			t.Fatalf("picked an unhealthy endpoint of zone a (not in panic): %s", a)
		default:
			b++
			bSeen[a] = true
		}
	}
	chi := 0.0
	for _, c := range [][2]float64{{aHealthy, 43}, {aDegraded, 41}, {b, 16}} {
		want := c[1] * n / 100
		chi += (c[0] - want) * (c[0] - want) / want
	}
	if chi > 13.82 || len(bSeen) != 10 { // 2 degrees of freedom, p = 0.001
		t.Fatalf("picks %v/%v/%v (want 43/41/16 %%), chi-square %.1f; zone b endpoints seen %d of 10", aHealthy, aDegraded, b, chi, len(bSeen))
	}
}

// TestLocalityBalancerSpills: a LocalityBalancer of a spillover service
// follows the priority loads (28 % to the source's zone, 72 % to the rest of
// its region), not only the deepest match.
func TestLocalityBalancerSpills(t *testing.T) {
	tree, err := Build(spillTopology("random"), BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lb, err := NewLocalityBalancer(tree, "s", Locality{"region": "r1", "zone": "z1"}, PickerOptions{Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	if l := lb.Loads(); l.N != 3 || l.Healthy[0] != 28 {
		t.Fatalf("loads %+v", l)
	}
	const n = 10000
	var z1 float64 // z1's endpoints are 127.0.9.1 to 127.0.9.10
	for range n {
		a, err := lb.Balance("")
		if err != nil {
			t.Fatal(err)
		}
		if a.Addr().As4()[3] <= 10 {
			z1++
		}
	}
	if math.Abs(z1-0.28*n) > 4*math.Sqrt(n*0.28*0.72) {
		t.Fatalf("%v of %d picks in the source's zone, want about 28 %%", z1, n)
	}
}

func TestBuildValidatesFailover(t *testing.T) {
	svc := func(mut func(s *ServiceSpec)) *Topology {
		s := ServiceSpec{Name: "a", Spillover: &SpilloverSpec{}, Failover: []FailoverSpec{{From: "r1", To: "r2"}},
			Endpoints: []EndpointSpec{{Address: "127.0.0.1:80"}}}
		mut(&s)
		return &Topology{Services: []ServiceSpec{s}}
	}
	cases := []struct {
		name, want string
		mut        func(s *ServiceSpec)
	}{
		{"no spillover", "failover needs spillover", func(s *ServiceSpec) { s.Spillover = nil }},
		{"no region scope", `the scopes [zone] have no "region"`, func(s *ServiceSpec) { s.Scopes = []string{"zone"} }},
		{"from is to", `failover from "r1" to "r1": locality lb failover settings must specify different regions`, func(s *ServiceSpec) { s.Failover[0].To = "r1" }},
		{"from twice", `an earlier rule has from "r1"`, func(s *ServiceSpec) { s.Failover = append(s.Failover, FailoverSpec{From: "r1", To: "r3"}) }},
		{"empty", "regions must be non-empty", func(s *ServiceSpec) { s.Failover[0].To = "" }},
		{"control", "control character", func(s *ServiceSpec) { s.Failover[0].To = "r\x1b" }},
		{"too many", "256 failover rules (limit 255)", func(s *ServiceSpec) { s.Failover = make([]FailoverSpec, 256) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Build(svc(c.mut), BuildOptions{})
			if !errors.Is(err, ErrInvalidTopology) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want ErrInvalidTopology mentioning %q", err, c.want)
			}
		})
	}
}

// TestFailoverEncoding pins, from docs/FORMAT.md, where failover rules go:
// their count in policy byte 23, the pairs (u16 length + bytes, from then
// to) after the node values in the metadata; and that they decode back.
func TestFailoverEncoding(t *testing.T) {
	top := &Topology{Services: []ServiceSpec{{Name: "s", Scopes: []string{"region"}, Spillover: &SpilloverSpec{},
		Failover:  []FailoverSpec{{From: "r1", To: "r2"}, {From: "r3", To: "r1"}},
		Endpoints: []EndpointSpec{{Address: "127.0.0.1:80", Locality: Locality{"region": "r2"}}}}}}
	tree, err := Build(top, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b := tree.Bytes()
	pols := int(le.Uint32(b[wire.HEndpointsOff:])) + wire.EndpointRecordSize
	if b[pols+23] != 2 {
		t.Fatalf("policy byte 23 is %d, want 2 rules", b[pols+23])
	}
	wantTail := []byte{2, 0, 'r', '1', 2, 0, 'r', '2', 2, 0, 'r', '3', 2, 0, 'r', '1'}
	if !bytes.HasSuffix(b, wantTail) {
		t.Fatalf("metadata ends %x, want %x", b[len(b)-len(wantTail):], wantTail)
	}
	if got := tree.Services()[0].failover; len(got) != 2 || got[1] != (FailoverSpec{From: "r3", To: "r1"}) {
		t.Fatalf("decoded failover %+v", got)
	}
}

// TestFailoverPrefersToRegion: Istio's example shape — the source's region
// us-east has no endpoint; the rule us-east → eu-west puts eu-west before
// ap-south.
func TestFailoverPrefersToRegion(t *testing.T) {
	top := &Topology{Services: []ServiceSpec{{Name: "s", Scopes: []string{"region", "zone"}, Spillover: &SpilloverSpec{},
		Failover: []FailoverSpec{{From: "us-east", To: "eu-west"}},
		Endpoints: []EndpointSpec{
			{Address: "127.0.0.1:80", Locality: Locality{"region": "ap-south", "zone": "a"}},
			{Address: "127.0.0.2:80", Locality: Locality{"region": "eu-west", "zone": "b"}},
		}}}}
	tree, err := Build(top, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc := tree.Services()[0]
	l := svc.Loads(Locality{"region": "us-east", "zone": "a"})
	if l.N != 2 || l.Failover[0] != 1 || l.Failover[1] != 2 || l.Healthy[0] != 100 {
		t.Fatalf("loads %+v", l)
	}
	p := NewPicker(tree, PickerOptions{Seed: 1})
	for range 100 {
		if i, _ := p.PickLoads(svc, &l, 0); tree.Endpoint(i).Addr.String() != "127.0.0.2:80" {
			t.Fatalf("picked %s, want eu-west's endpoint", tree.Endpoint(i).Addr)
		}
	}
}

// TestLocalityBalancerUpdateRecomputesLoads: after Update to a tree where the
// source's zone is healthy again, all the load stays in the zone.
func TestLocalityBalancerUpdateRecomputesLoads(t *testing.T) {
	top := spillTopology("random")
	t1, err := Build(top, BuildOptions{Generation: 1})
	if err != nil {
		t.Fatal(err)
	}
	lb, err := NewLocalityBalancer(t1, "s", Locality{"region": "r1", "zone": "z1"}, PickerOptions{Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	for i := range top.Services[0].Endpoints {
		top.Services[0].Endpoints[i].Healthy, top.Services[0].Endpoints[i].Degraded = nil, false
	}
	t2, err := Build(top, BuildOptions{Generation: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := lb.Update(t2); err != nil {
		t.Fatal(err)
	}
	if l := lb.Loads(); l.Healthy[0] != 100 || l.Counts[0].Total != 10 {
		t.Fatalf("loads after update %+v", l)
	}
	for range 200 {
		if a, _ := lb.Balance(""); a.Addr().As4()[3] > 10 {
			t.Fatalf("picked %s outside the healthy source zone", a)
		}
	}
}

// chiCritical are chi-square critical values at p = 0.0001 for 1 to 9
// degrees of freedom.
var chiCritical = [...]float64{15.14, 18.42, 21.11, 23.51, 25.74, 27.86, 29.88, 31.83, 33.72}

// TestPickLoadsFrequenciesRandom: for random spillover topologies (degraded
// and unhealthy endpoints, failover rules, overrides, every policy) and
// sources, the share of picks landing in each priority matches its load
// (healthy + degraded) by a chi-square test, a priority not in panic never
// yields an unhealthy endpoint, and a priority without load yields none.
// The picker is seeded, so the test is deterministic.
func TestPickLoadsFrequenciesRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	const picks = 3000
	tested := 0
	for it := 0; tested < 300; it++ {
		top, _, _ := randomSpilloverTopology(rng)
		top.Services[0].Policy = policyNames[rng.IntN(len(policyNames))]
		tree, err := Build(top, BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		svc := tree.Services()[0]
		l := svc.Loads(randomSource(rng, top.Services[0].Scopes))
		if l.N < 2 {
			continue
		}
		tested++
		// Envoy's corner: with every availability rounded to 0 (a tiny
		// factor) and only some priorities in panic, no priority gets load;
		// choosePriority then falls back to P0 healthy ("unexpected load
		// error"), and so does Loads.choose.
		var load [MaxPriorities]float64
		sum := 0.0
		for pr := range l.N {
			load[pr] = float64(l.Healthy[pr]) + float64(l.Degraded[pr])
			sum += load[pr]
		}
		if sum == 0 {
			load[0] = 100
		}
		p := NewPicker(tree, PickerOptions{Seed: uint64(it + 1)})
		var got [MaxPriorities]float64
		for range picks {
			i, ok := p.PickLoads(svc, &l, rng.Uint64())
			if !ok {
				continue // Envoy: no host (a load on an empty set cannot happen; checked below)
			}
			pr, unhealthy := priorityOfAny(&l, i)
			if pr < 0 || (unhealthy && !l.InPanic(pr)) {
				t.Fatalf("topology %d: pick %d is in priority %d (unhealthy %v) with loads %+v", it, i, pr, unhealthy, l)
			}
			got[pr]++
		}
		chi, df := 0.0, -1
		for pr := range l.N {
			want := load[pr] * picks / 100
			if want == 0 {
				if got[pr] != 0 {
					t.Fatalf("topology %d: priority %d has no load and %v picks; loads %+v", it, pr, got[pr], l)
				}
				continue
			}
			chi += (got[pr] - want) * (got[pr] - want) / want
			df++
		}
		if df > 0 && chi > chiCritical[df-1] {
			t.Fatalf("topology %d (%s): picks %v for loads %v/%v: chi-square %.1f, %d df", it, svc.policy, got[:l.N], l.Healthy[:l.N], l.Degraded[:l.N], chi, df)
		}
	}
}

// priorityOfAny is the priority whose endpoints hold i, and whether i is
// one of its unhealthy endpoints.
func priorityOfAny(l *Loads, i uint32) (int, bool) {
	for p := range l.N {
		for set := range numSets {
			for _, s := range l.spans(set, p) {
				if i >= s.Lo && i < s.Hi {
					return p, set == setUnhealthy
				}
			}
		}
	}
	return -1, false
}

// TestLoadsPriorityHoldsEndpoint: Loads.Priority names, for every endpoint
// of random spillover services, a priority of the endpoint's rank (its
// scope prefix shared with the source, Istio's rule in istioRank), and
// every endpoint of the service has one (priorities cover all endpoints).
func TestLoadsPriorityHoldsEndpoint(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	for range 500 {
		top, _, _ := randomSpilloverTopology(rng)
		spec := &top.Services[0]
		tree, err := Build(top, BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		svc := tree.Services()[0]
		src := randomSource(rng, spec.Scopes)
		l := svc.Loads(src)
		for _, e := range spec.Endpoints {
			i := endpointIndex(t, tree, svc, e.Address)
			p := l.Priority(i)
			if want := istioRank(spec.Scopes, e.Locality, src); p < 0 || int(l.Rank[p]) != want {
				t.Fatalf("%s from %v: Priority = %d (rank %d), want a priority of rank %d", e.Address, src, p, l.Rank[max(p, 0)], want)
			}
		}
		if p := l.Priority(svc.lay.EpFirst + svc.lay.EpTotal); p != -1 {
			t.Fatalf("an endpoint past the service: Priority = %d, want -1", p)
		}
	}
}

func endpointIndex(t *testing.T, tree *Tree, svc *Service, addr string) uint32 {
	t.Helper()
	for i := svc.lay.EpFirst; i < svc.lay.EpFirst+svc.lay.EpTotal; i++ {
		if tree.Endpoint(i).Addr.String() == addr {
			return i
		}
	}
	t.Fatalf("no endpoint %s", addr)
	return 0
}
