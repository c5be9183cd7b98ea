package shared

import (
	"errors"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"testing"
)

// localityEndpoint is an endpoint of the locality balancer tests.
type localityEndpoint struct {
	addr                  string
	region, zone, subzone string
	unhealthy             bool
}

var localityEndpoints = []localityEndpoint{
	{"127.0.5.1:9080", "us-east", "us-east-1a", "rack-1", false},
	{"127.0.5.2:9080", "us-east", "us-east-1a", "rack-1", false},
	{"127.0.5.9:9080", "us-east", "us-east-1a", "rack-1", true},
	{"127.0.5.3:9080", "us-east", "us-east-1a", "rack-2", false},
	{"127.0.5.4:9080", "us-east", "us-east-1b", "rack-1", false},
	{"127.0.6.1:9080", "eu-west", "eu-west-1a", "rack-1", false},
}

// localityTree builds "reviews" (host "reviews.local") over eps, and an
// unrelated service "ratings".
func localityTree(tb testing.TB, mode, policy string, gen uint64, eps []localityEndpoint) *Tree {
	tb.Helper()
	reviews := ServiceSpec{Name: "reviews", Hosts: []string{"reviews.local"}, Mode: mode, Policy: policy}
	for _, e := range eps {
		healthy := !e.unhealthy
		reviews.Endpoints = append(reviews.Endpoints, EndpointSpec{
			Address:  e.addr,
			Locality: Locality{"region": e.region, "zone": e.zone, "subzone": e.subzone},
			Healthy:  &healthy,
		})
	}
	ratings := ServiceSpec{Name: "ratings", Endpoints: []EndpointSpec{{Address: "127.0.7.1:9080"}}}
	tree, err := Build(&Topology{Services: []ServiceSpec{reviews, ratings}}, BuildOptions{Generation: gen})
	if err != nil {
		tb.Fatal(err)
	}
	return tree
}

// balanceSet returns the sorted set of addresses that n round-robin picks
// reach (with round robin, every candidate in n ≥ candidates picks).
func balanceSet(tb testing.TB, lb *LocalityBalancer, n int) []string {
	tb.Helper()
	seen := map[string]bool{}
	for range n {
		a, err := lb.Balance("")
		if err != nil {
			tb.Fatal(err)
		}
		seen[a.String()] = true
	}
	return slices.Sorted(maps.Keys(seen))
}

func TestLocalityBalancer(t *testing.T) {
	tests := []struct {
		name string
		mode string
		src  Locality
		want []string // nil: ErrNoCandidate
	}{
		{"same subzone", "failover", Locality{"region": "us-east", "zone": "us-east-1a", "subzone": "rack-1"},
			[]string{"127.0.5.1:9080", "127.0.5.2:9080"}},
		{"same zone, other subzone", "failover", Locality{"region": "us-east", "zone": "us-east-1a", "subzone": "rack-7"},
			[]string{"127.0.5.1:9080", "127.0.5.2:9080", "127.0.5.3:9080"}},
		{"same region, other zone", "failover", Locality{"region": "us-east", "zone": "us-east-1c"},
			[]string{"127.0.5.1:9080", "127.0.5.2:9080", "127.0.5.3:9080", "127.0.5.4:9080"}},
		{"other region", "failover", Locality{"region": "eu-west", "zone": "eu-west-1a", "subzone": "rack-1"},
			[]string{"127.0.6.1:9080"}},
		{"unknown region: every healthy endpoint", "failover", Locality{"region": "ap-south"},
			[]string{"127.0.5.1:9080", "127.0.5.2:9080", "127.0.5.3:9080", "127.0.5.4:9080", "127.0.6.1:9080"}},
		{"strict, full match", "strict", Locality{"region": "us-east", "zone": "us-east-1b", "subzone": "rack-1"},
			[]string{"127.0.5.4:9080"}},
		{"strict, partial match", "strict", Locality{"region": "us-east", "zone": "us-east-1a", "subzone": "rack-7"}, nil},
		{"strict, no match", "strict", Locality{}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tree := localityTree(t, tc.mode, "round_robin", 1, localityEndpoints)
			lb, err := NewLocalityBalancer(tree, "reviews.local", tc.src, PickerOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == nil {
				if a, err := lb.Balance("k"); !errors.Is(err, ErrNoCandidate) {
					t.Fatalf("Balance = %v, %v; want ErrNoCandidate", a, err)
				}
				return
			}
			if got := balanceSet(t, lb, 20); !slices.Equal(got, tc.want) {
				t.Fatalf("candidates %v, want %v", got, tc.want)
			}
		})
	}
}

func TestLocalityBalancerUnknownService(t *testing.T) {
	tree := localityTree(t, "failover", "random", 1, localityEndpoints)
	if _, err := NewLocalityBalancer(tree, "details", Locality{}, PickerOptions{}); !errors.Is(err, ErrUnknownService) {
		t.Fatalf("NewLocalityBalancer of a missing service: %v, want ErrUnknownService", err)
	}
}

func TestLocalityBalancerUpdate(t *testing.T) {
	src := Locality{"region": "us-east", "zone": "us-east-1a", "subzone": "rack-1"}
	lb, err := NewLocalityBalancer(localityTree(t, "failover", "round_robin", 1, localityEndpoints), "reviews", src, PickerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Generation 2: 127.0.5.2 moves to rack-2, 127.0.5.8 joins rack-1.
	next := slices.Clone(localityEndpoints)
	next[1].subzone = "rack-2"
	next = append(next, localityEndpoint{"127.0.5.8:9080", "us-east", "us-east-1a", "rack-1", false})
	if err := lb.Update(localityTree(t, "failover", "round_robin", 2, next)); err != nil {
		t.Fatal(err)
	}
	want := []string{"127.0.5.1:9080", "127.0.5.8:9080"}
	if got := balanceSet(t, lb, 20); !slices.Equal(got, want) {
		t.Fatalf("after Update: %v, want %v", got, want)
	}
	// A tree without the service is refused; the balancer keeps generation 2.
	empty, err := Build(&Topology{Services: []ServiceSpec{{Name: "ratings", Endpoints: []EndpointSpec{{Address: "127.0.7.1:9080"}}}}}, BuildOptions{Generation: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := lb.Update(empty); !errors.Is(err, ErrUnknownService) {
		t.Fatalf("Update to a tree without the service: %v, want ErrUnknownService", err)
	}
	if got := balanceSet(t, lb, 20); !slices.Equal(got, want) {
		t.Fatalf("after a refused Update: %v, want %v", got, want)
	}
	if svc, _ := lb.Candidates(); svc.Tree().Generation() != 2 {
		t.Fatalf("generation %d after a refused Update, want 2", svc.Tree().Generation())
	}
}

func TestLocalityBalancerInFlightAcrossUpdate(t *testing.T) {
	src := Locality{"region": "us-east", "zone": "us-east-1a", "subzone": "rack-1"}
	lb, err := NewLocalityBalancer(localityTree(t, "failover", "least_connections", 1, localityEndpoints), "reviews", src, PickerOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	busy, idle := netip.MustParseAddrPort("127.0.5.1:9080"), netip.MustParseAddrPort("127.0.5.2:9080")
	lb.Inc(busy)
	lb.Inc(busy)
	lb.Inc(netip.MustParseAddrPort("127.0.99.1:9080")) // unknown: ignored
	if got := balanceSet(t, lb, 20); !slices.Equal(got, []string{idle.String()}) {
		t.Fatalf("least_connections with %s busy: %v", busy, got)
	}
	// The same endpoints in a new generation (extra endpoint elsewhere): the
	// count of busy carries over.
	next := append(slices.Clone(localityEndpoints), localityEndpoint{"127.0.6.2:9080", "eu-west", "eu-west-1a", "rack-2", false})
	if err := lb.Update(localityTree(t, "failover", "least_connections", 2, next)); err != nil {
		t.Fatal(err)
	}
	if got := lb.InFlight(busy); got != 2 {
		t.Fatalf("in flight of %s after Update: %d, want 2", busy, got)
	}
	if got := balanceSet(t, lb, 20); !slices.Equal(got, []string{idle.String()}) {
		t.Fatalf("least_connections with %s busy after Update: %v", busy, got)
	}
	lb.Done(busy)
	lb.Done(busy)
	if got := balanceSet(t, lb, 20); len(got) != 2 {
		t.Fatalf("after Done: %v, want both endpoints", got)
	}
}

func TestLocalityBalancerConsistentHash(t *testing.T) {
	src := Locality{"region": "us-east", "zone": "us-east-1c"}
	lb, err := NewLocalityBalancer(localityTree(t, "failover", "consistent_hash", 1, localityEndpoints), "reviews", src, PickerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[netip.AddrPort]bool{}
	for _, key := range []string{"alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi"} {
		first, err := lb.Balance(key)
		if err != nil {
			t.Fatal(err)
		}
		for range 5 {
			if again, _ := lb.Balance(key); again != first {
				t.Fatalf("key %q: %s, then %s", key, first, again)
			}
		}
		seen[first] = true
	}
	if len(seen) < 2 {
		t.Fatalf("8 keys all went to %v", seen)
	}
}

// TestLocalityBalancerConcurrentUpdate balances while another goroutine
// swaps between two trees; every answer is a candidate of one of them.
func TestLocalityBalancerConcurrentUpdate(t *testing.T) {
	src := Locality{"region": "us-east", "zone": "us-east-1a", "subzone": "rack-1"}
	next := slices.Clone(localityEndpoints)
	next[0].subzone = "rack-2"
	trees := []*Tree{localityTree(t, "strict", "random", 1, localityEndpoints), localityTree(t, "strict", "random", 2, next)}
	allowed := map[string]bool{"127.0.5.1:9080": true, "127.0.5.2:9080": true}
	lb, err := NewLocalityBalancer(trees[0], "reviews", src, PickerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			for range 3000 {
				a, err := lb.Balance("")
				if err != nil || !allowed[a.String()] {
					t.Errorf("Balance = %v, %v", a, err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for k := range 200 {
			if err := lb.Update(trees[k%2]); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Wait()
}

func TestLocalityBalancerZeroAllocs(t *testing.T) {
	src := Locality{"region": "us-east", "zone": "us-east-1a"}
	for pol := range PolicyConsistentHash + 1 {
		lb, err := NewLocalityBalancer(localityTree(t, "failover", pol.String(), 1, localityEndpoints), "reviews", src, PickerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		allocs := testing.AllocsPerRun(1000, func() {
			a, _ := lb.Balance("user-1")
			lb.Inc(a)
			lb.Done(a)
		})
		if allocs != 0 {
			t.Errorf("%s: %.1f allocs per Balance, want 0", pol, allocs)
		}
	}
}

func BenchmarkLocalityBalancer(b *testing.B) {
	src := Locality{"region": "us-east", "zone": "us-east-1a"}
	for pol := range PolicyConsistentHash + 1 {
		b.Run("policy="+pol.String(), func(b *testing.B) {
			lb, err := NewLocalityBalancer(localityTree(b, "failover", pol.String(), 1, localityEndpoints), "reviews", src, PickerOptions{})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				lb.Balance("user-1")
			}
		})
	}
}
