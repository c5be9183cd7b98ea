package shared

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

// laService is a service over [region, zone]: r1/z1 and r1/z2 with two
// eligible endpoints each (and an unhealthy one in r1/z1), r2/z3 with four.
func laService(t *testing.T, la *LoadAwareSpec, limit string) (*Service, map[string]uint32) {
	t.Helper()
	no := false
	var eps []EndpointSpec
	add := func(addr, region, zone string, healthy *bool) {
		eps = append(eps, EndpointSpec{Address: addr, Locality: Locality{"region": region, "zone": zone}, Healthy: healthy})
	}
	add("127.0.1.1:80", "r1", "z1", nil)
	add("127.0.1.2:80", "r1", "z1", nil)
	add("127.0.1.9:80", "r1", "z1", &no)
	add("127.0.1.3:80", "r1", "z2", nil)
	add("127.0.1.4:80", "r1", "z2", nil)
	for i := range 4 {
		add(fmt.Sprintf("127.0.2.%d:80", i+1), "r2", "z3", nil)
	}
	tree := mustBuild(t, &Topology{Services: []ServiceSpec{{Name: "a", Scopes: []string{"region", "zone"}, Policy: "least_request",
		LoadAware: la, FailoverLimit: limit, Endpoints: eps}}})
	idx := map[string]uint32{}
	for i := range uint32(tree.NumEndpoints()) {
		idx[tree.Endpoint(i).Addr.String()] = i
	}
	return tree.Services()[0], idx
}

func band(high, low uint32) *LoadAwareSpec { return &LoadAwareSpec{High: &high, Low: &low} }

// TestWidenBand: with the band [1, 2] per endpoint, r1/z1 (2 eligible
// endpoints) widens to r1 above 4 in flight, stays wide down to 2, and
// narrows below 2; r1 (4 endpoints) widens to the root above 8.
func TestWidenBand(t *testing.T) {
	s, idx := laService(t, band(2, 1), "")
	p := NewPicker(s.Tree(), PickerOptions{Seed: 1})
	r := s.Lookup(Locality{"region": "r1", "zone": "z1"})
	z1a, z1b, z2a := idx["127.0.1.1:80"], idx["127.0.1.2:80"], idx["127.0.1.3:80"]
	depth := func() int { return p.Widen(s, r).Depth }
	steps := []struct {
		ep    uint32
		start bool
		want  int
		why   string
	}{
		{z1a, true, 2, "1 in flight"},
		{z1b, true, 2, "2"},
		{z1a, true, 2, "3"},
		{z1b, true, 2, "4 = high × 2: on the edge, not above"},
		{z1a, true, 1, "5: above the high edge, widens"},
		{z1a, false, 1, "4: between the edges, stays wide"},
		{z1b, false, 1, "3"},
		{z1a, false, 1, "2 = low × 2: on the edge, not below"},
		{z1b, false, 2, "1: below the low edge, narrows"},
		{z1b, true, 2, "2: between the edges, stays narrow"},
	}
	for i, st := range steps {
		if st.start {
			p.Inc(st.ep)
		} else {
			p.Done(st.ep)
		}
		if got := depth(); got != st.want {
			t.Fatalf("step %d (%s): depth %d, want %d", i, st.why, got, st.want)
		}
	}
	for range 3 { // z1 at 5: wide; r1 at 5+4 = 9 > 8: the root
		p.Inc(z1a)
	}
	for range 4 {
		p.Inc(z2a)
	}
	if w := p.Widen(s, r); w.Depth != 0 || w.Len() != 8 {
		t.Fatalf("r1 above its high edge: %+v, want the root's 8 endpoints", w)
	}
	p.Inc(idx["127.0.1.9:80"]) // an unhealthy endpoint counts nowhere
	if p.loads.count[r.Node].Load() != 5 {
		t.Fatalf("z1 counts %d in flight, want 5", p.loads.count[r.Node].Load())
	}
}

// TestWidenNoFlapping: a load that crosses the high edge back and forth
// widens once and stays wide; one that crosses the low edge back and forth
// narrows once and stays narrow.
func TestWidenNoFlapping(t *testing.T) {
	s, idx := laService(t, band(3, 1), "")
	p := NewPicker(s.Tree(), PickerOptions{Seed: 1})
	r := s.Lookup(Locality{"region": "r1", "zone": "z1"})
	ep := idx["127.0.1.1:80"]
	for range 7 {
		p.Inc(ep)
	}
	if d := p.Widen(s, r).Depth; d != 1 {
		t.Fatalf("7 in flight, above high × 2 = 6: depth %d, want 1", d)
	}
	for i := range 20 { // 7 ↔ 6, around high × 2 = 6
		if i%2 == 0 {
			p.Done(ep)
		} else {
			p.Inc(ep)
		}
		if d := p.Widen(s, r).Depth; d != 1 {
			t.Fatalf("step %d: depth %d; a wide node narrowed between the edges", i, d)
		}
	}
	for range 6 { // 1, below low × 2 = 2
		p.Done(ep)
	}
	if d := p.Widen(s, r).Depth; d != 2 {
		t.Fatalf("1 in flight, below low × 2 = 2: depth %d, want 2", d)
	}
	for i := range 20 { // 1 ↔ 2
		if i%2 == 0 {
			p.Inc(ep)
		} else {
			p.Done(ep)
		}
		if d := p.Widen(s, r).Depth; d != 2 {
			t.Fatalf("step %d: depth %d; a narrow node widened between the edges", i, d)
		}
	}
}

// TestWidenStopsAtFailoverLimit: widening never goes above failover_limit.
func TestWidenStopsAtFailoverLimit(t *testing.T) {
	s, idx := laService(t, band(2, 1), "region")
	p := NewPicker(s.Tree(), PickerOptions{Seed: 1})
	r := s.Lookup(Locality{"region": "r1", "zone": "z1"})
	for _, a := range []string{"127.0.1.1:80", "127.0.1.2:80", "127.0.1.3:80", "127.0.1.4:80"} {
		for range 5 {
			p.Inc(idx[a])
		}
	}
	if w := p.Widen(s, r); w.Depth != 1 || w.Len() != 4 {
		t.Fatalf("%+v, want r1 (depth 1, 4 endpoints): the limit is region", w)
	}
}

// TestLoadAwareRefused: strict services never widen, and what load_aware
// cannot apply to yet is refused with the field named, never ignored.
func TestLoadAwareRefused(t *testing.T) {
	no := false
	cases := []struct {
		name string
		spec ServiceSpec
		want string
	}{
		{"strict", ServiceSpec{Mode: "strict", LoadAware: &LoadAwareSpec{}}, "load_aware cannot apply in mode strict"},
		{"spillover", ServiceSpec{Spillover: &SpilloverSpec{}, LoadAware: &LoadAwareSpec{}}, "load_aware is not implemented with spillover"},
		{"locality off", ServiceSpec{LocalityLB: &no, LoadAware: &LoadAwareSpec{}}, "load_aware needs locality load balancing"},
		{"network rule", ServiceSpec{Scopes: []string{"network", "region"}, LoadAware: &LoadAwareSpec{}}, "load_aware is not implemented with the network rule"},
		{"low = high", ServiceSpec{LoadAware: band(3, 3)}, "load_aware band low 3, high 3"},
		{"low 0", ServiceSpec{LoadAware: band(3, 0)}, "load_aware band low 0, high 3"},
		{"high too big", ServiceSpec{LoadAware: band(65536, 1)}, "load_aware band low 1, high 65536"},
		{"default low above high", ServiceSpec{LoadAware: &LoadAwareSpec{High: new(uint32(1))}}, "load_aware band low 1, high 1"},
	}
	for _, c := range cases {
		c.spec.Name = "a"
		c.spec.Endpoints = []EndpointSpec{{Address: "127.0.0.1:80"}}
		_, err := Build(&Topology{Services: []ServiceSpec{c.spec}}, BuildOptions{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want %q", c.name, err, c.want)
		}
	}
	plain := ServiceSpec{Name: "a", Scopes: []string{"network", "region"}, NetworkRule: NetworkRulePlain, LoadAware: &LoadAwareSpec{},
		Endpoints: []EndpointSpec{{Address: "127.0.0.1:80"}}}
	tree, err := Build(&Topology{Services: []ServiceSpec{plain}}, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h, l, ok := tree.Services()[0].LoadAware(); !ok || h != DefaultLoadHigh || l != DefaultLoadLow {
		t.Fatalf("LoadAware() = %d, %d, %v; want the defaults", h, l, ok)
	}
	back, err := Decode(tree.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if h, l, ok := back.Services()[0].LoadAware(); !ok || h != DefaultLoadHigh || l != DefaultLoadLow {
		t.Fatalf("decoded LoadAware() = %d, %d, %v; want the defaults", h, l, ok)
	}
}

// TestWidenAllocatesNothing: Inc, Widen and Done on the request path.
func TestWidenAllocatesNothing(t *testing.T) {
	s, idx := laService(t, band(2, 1), "")
	p := NewPicker(s.Tree(), PickerOptions{Seed: 1})
	r := s.Lookup(Locality{"region": "r1", "zone": "z1"})
	ep := idx["127.0.1.1:80"]
	if n := testing.AllocsPerRun(1000, func() {
		p.Inc(ep)
		p.Widen(s, r)
		p.Done(ep)
	}); n != 0 {
		t.Fatalf("%v allocations per request, want 0", n)
	}
}

// TestLocalityBalancerWidens: a LocalityBalancer widens a load_aware
// service by its Inc and Done, and a new tree (Update) keeps the requests
// in flight on the nodes too, so their Done narrows it again.
func TestLocalityBalancerWidens(t *testing.T) {
	s, _ := laService(t, band(2, 1), "")
	lb, err := NewLocalityBalancer(s.Tree(), "a", Locality{"region": "r1", "zone": "z1"}, PickerOptions{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	local := func(n int) int {
		k := 0
		for range n {
			a, err := lb.Balance("")
			if err != nil {
				t.Fatal(err)
			}
			if z := a.String(); z == "127.0.1.1:80" || z == "127.0.1.2:80" {
				k++
			}
		}
		return k
	}
	z1 := netip.MustParseAddrPort("127.0.1.1:80")
	for range 5 {
		lb.Inc(z1)
	}
	if k := local(60); k == 60 {
		t.Fatalf("5 in flight on z1's 2 endpoints: all 60 picks local; want r1's")
	}
	if err := lb.Update(s.Tree()); err != nil {
		t.Fatal(err)
	}
	if k := local(60); k == 60 {
		t.Fatalf("after Update: all 60 picks local; the in-flight requests were not carried to the nodes")
	}
	for range 5 {
		lb.Done(z1)
	}
	if k := local(60); k != 60 {
		t.Fatalf("nothing in flight: %d of 60 picks local, want all", k)
	}
}
