package shared

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func u32p(v uint32) *uint32 { return &v }

func TestBuildValidation(t *testing.T) {
	ep := func(addr string) EndpointSpec { return EndpointSpec{Address: addr} }
	svc := func(mut func(s *ServiceSpec)) *Topology {
		s := ServiceSpec{Name: "a", Endpoints: []EndpointSpec{ep("127.0.0.1:80")}}
		mut(&s)
		return &Topology{Services: []ServiceSpec{s}}
	}
	nineScopes := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"}
	cases := []struct {
		name string
		top  *Topology
		want string
		is   error
	}{
		{"nil", nil, "no topology", ErrInvalidTopology},
		{"no name", svc(func(s *ServiceSpec) { s.Name = "" }), "without a name", ErrInvalidTopology},
		{"duplicate endpoint", svc(func(s *ServiceSpec) { s.Endpoints = append(s.Endpoints, ep("127.0.0.1:80")) }), "duplicate endpoint 127.0.0.1:80", ErrInvalidTopology},
		{"duplicate mapped", svc(func(s *ServiceSpec) { s.Endpoints = append(s.Endpoints, ep("[::ffff:127.0.0.1]:80")) }), "duplicate endpoint", ErrInvalidTopology},
		{"bad address", svc(func(s *ServiceSpec) { s.Endpoints[0].Address = "localhost:80" }), `bad address "localhost:80"`, ErrInvalidTopology},
		{"no port", svc(func(s *ServiceSpec) { s.Endpoints[0].Address = "127.0.0.1" }), "bad address", ErrInvalidTopology},
		{"port 0", svc(func(s *ServiceSpec) { s.Endpoints[0].Address = "127.0.0.1:0" }), "port 0", ErrInvalidTopology},
		{"bad vip", svc(func(s *ServiceSpec) { s.VIP = "vip" }), "vip: bad address", ErrInvalidTopology},
		{"unknown mode", svc(func(s *ServiceSpec) { s.Mode = "nearest" }), `unknown mode "nearest" (want one of failover, strict)`, ErrInvalidTopology},
		{"unknown policy", svc(func(s *ServiceSpec) { s.Policy = "fastest" }), `unknown policy "fastest"`, ErrInvalidTopology},
		{"unknown health", svc(func(s *ServiceSpec) { s.Health = "some" }), `unknown health "some"`, ErrInvalidTopology},
		{"nine scopes", svc(func(s *ServiceSpec) { s.Scopes = nineScopes }), "9 scopes (want 1 to 8)", ErrInvalidTopology},
		{"repeated scope", svc(func(s *ServiceSpec) { s.Scopes = []string{"zone", "zone"} }), `scope "zone"`, ErrInvalidTopology},
		{"all weights zero", svc(func(s *ServiceSpec) { s.Endpoints[0].Weight = u32p(0) }), "every endpoint has weight 0", ErrInvalidTopology},
		{"host reused", &Topology{Services: []ServiceSpec{{Name: "a", Hosts: []string{"x"}}, {Name: "b", Hosts: []string{"x"}}}}, `host "x" is already used`, ErrInvalidTopology},
		{"name reused", &Topology{Services: []ServiceSpec{{Name: "a"}, {Name: "a"}}}, `"a" is already used`, ErrInvalidTopology},
		{"too many hosts", svc(func(s *ServiceSpec) { s.Hosts = make([]string, 256) }), "256 hosts", ErrInvalidTopology},
		{"long value", svc(func(s *ServiceSpec) { s.Endpoints[0].Locality = Locality{"zone": strings.Repeat("z", 70000)} }), "longer than 65535", ErrInvalidTopology},
		{"too many services", &Topology{Services: make([]ServiceSpec, MaxServices+1)}, "65537 services", ErrTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Build(c.top, BuildOptions{})
			if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %v mentioning %q", err, c.is, c.want)
			}
		})
	}
}

// TestBuildCollision finds two values with equal low label bits is too slow;
// instead it forces a collision by checking that the detector compares values,
// using a tree where the same label must map to one value.
func TestBuildDetectsCollision(t *testing.T) {
	labels := map[uint64]string{Label("zone-x"): "other"}
	s, err := prepareHeader(&ServiceSpec{Name: "a", Scopes: []string{"zone"}})
	if err != nil {
		t.Fatal(err)
	}
	specs := []EndpointSpec{{Address: "127.0.0.1:1", Locality: Locality{"zone": "zone-x"}}}
	if err := s.prepareEndpoints(specs); err != nil {
		t.Fatal(err)
	}
	err = s.layoutNodes(specs, labels)
	if !errors.Is(err, ErrLabelCollision) || !strings.Contains(err.Error(), `"other" and "zone-x"`) {
		t.Fatalf("error %v, want a collision naming both values", err)
	}
}

func TestBuildDefaults(t *testing.T) {
	tree, err := Build(&Topology{Services: []ServiceSpec{{Name: "a", Endpoints: []EndpointSpec{{Address: "[::ffff:127.0.0.9]:81"}}}}}, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := tree.Services()[0]
	if fmt.Sprint(s.scopes) != "[region zone subzone]" || s.mode != ModeFailover || s.policy != PolicyRandom || s.health != HealthOnlyHealthy {
		t.Fatalf("defaults: %+v", s)
	}
	e := tree.Endpoint(0)
	if e.Weight != 1 || !e.Healthy || e.Addr.String() != "127.0.0.9:81" {
		t.Fatalf("endpoint defaults: %+v", e)
	}
}

func TestUnhealthyNeverCandidate(t *testing.T) {
	f := false
	top := &Topology{Services: []ServiceSpec{{Name: "a", Scopes: []string{"zone"}, Endpoints: []EndpointSpec{
		{Address: "127.0.0.1:1", Locality: Locality{"zone": "z1"}, Healthy: &f},
		{Address: "127.0.0.2:1", Locality: Locality{"zone": "z2"}},
	}}}}
	tree, err := Build(top, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := tree.Services()[0]
	r := s.Lookup(Locality{"zone": "z1"})
	if r.Len() != 1 || tree.Endpoint(r.Lo).Addr.String() != "127.0.0.2:1" || r.Depth != 0 {
		t.Fatalf("z1 source: range %+v, want only the healthy z2 endpoint at depth 0", r)
	}
	top.Services[0].Health = "allow_all"
	tree, _ = Build(top, BuildOptions{})
	s = tree.Services()[0]
	if r := s.Lookup(Locality{"zone": "z1"}); r.Len() != 1 || tree.Endpoint(r.Lo).Addr.String() != "127.0.0.1:1" {
		t.Fatalf("allow_all: range %+v, want the unhealthy z1 endpoint", r)
	}
}

func TestLookupZeroAllocs(t *testing.T) {
	tree := goldenTree(t)
	s, _ := tree.Service("reviews")
	src := Locality{"region": "us-east", "zone": "us-east-1a", "subzone": "rack-2"}
	var r Range
	allocs := testing.AllocsPerRun(1000, func() { r = s.Lookup(src) })
	if allocs != 0 {
		t.Fatalf("Lookup allocates %v times per call", allocs)
	}
	if r.Len() != 1 || r.Depth != 3 {
		t.Fatalf("range %+v", r)
	}
}

// TestSortKeysMatchesSort: the counting sort by head gives the order of a
// plain sort by sortKey.compare, for keys arriving in order, in reverse and
// shuffled within a head.
func TestSortKeysMatchesSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, paths := range []int{1, 2, 7, 300} {
		keys := make([]sortKey, 2000)
		for i := range keys {
			keys[i] = sortKey{head: rng.Uint64N(3)<<62 | rng.Uint64N(uint64(paths)), hi: rng.Uint64N(3), lo: rng.Uint64N(1 << 40), tail: uint64(i)}
		}
		for _, order := range []string{"shuffled", "sorted", "reversed"} {
			in := slices.Clone(keys)
			switch order {
			case "sorted":
				slices.SortFunc(in, func(a, b sortKey) int { return cmp.Compare(a.lo, b.lo) })
			case "reversed":
				slices.SortFunc(in, func(a, b sortKey) int { return cmp.Compare(b.lo, a.lo) })
			}
			want := slices.Clone(in)
			slices.SortFunc(want, sortKey.compare)
			if got := sortKeys(in, paths); !slices.Equal(got, want) {
				t.Fatalf("paths=%d, %s: counting sort differs from the plain sort", paths, order)
			}
		}
	}
}

// TestBuildFindsDuplicatesAmongMany: the address set tells apart addresses
// that differ only in port, in family or in one byte, and finds the one
// repeated address among thousands.
func TestBuildFindsDuplicatesAmongMany(t *testing.T) {
	var eps []EndpointSpec
	for i := range 3000 {
		eps = append(eps,
			EndpointSpec{Address: fmt.Sprintf("127.0.%d.%d:%d", i>>8, i&255, 80)},
			EndpointSpec{Address: fmt.Sprintf("127.0.%d.%d:%d", i>>8, i&255, 81)},
			EndpointSpec{Address: fmt.Sprintf("[::7f00:%x]:80", i)})
	}
	top := &Topology{Services: []ServiceSpec{{Name: "svc", Endpoints: eps}}}
	if _, err := Build(top, BuildOptions{}); err != nil {
		t.Fatalf("distinct addresses: %v", err)
	}
	top.Services[0].Endpoints = append(eps, EndpointSpec{Address: "[::7f00:abc]:80"})
	_, err := Build(top, BuildOptions{})
	if !errors.Is(err, ErrInvalidTopology) || !strings.Contains(err.Error(), "duplicate endpoint [::7f00:abc]:80") {
		t.Fatalf("repeated address: got %v, want a duplicate endpoint error naming it", err)
	}
}
