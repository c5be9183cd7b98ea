package shared

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// trafficSpec is a random service over three regions × three zones, with
// random weights and states, and optionally spillover (degraded and
// unhealthy endpoints then sit in aux trees) or the network rule.
func trafficSpec(rng *rand.Rand, policy string, spill, network bool) ServiceSpec {
	s := ServiceSpec{Name: "svc", Scopes: []string{"region", "zone"}, Policy: policy}
	if network {
		s.Scopes = []string{"network", "region", "zone"}
	}
	if spill {
		s.Spillover = &SpilloverSpec{}
	}
	for i := range 2 + rng.IntN(30) {
		w, healthy := uint32(1+rng.IntN(4)), rng.IntN(5) > 0
		e := EndpointSpec{
			Address:  fmt.Sprintf("127.0.%d.%d:80", i/200, i%200+1),
			Locality: Locality{"network": fmt.Sprint("n", rng.IntN(2)), "region": fmt.Sprint("r", rng.IntN(3)), "zone": fmt.Sprint("z", rng.IntN(3))},
			Weight:   &w, Healthy: &healthy, Degraded: spill && healthy && rng.IntN(4) == 0,
		}
		s.Endpoints = append(s.Endpoints, e)
	}
	return s
}

// oracleCross is the share of a pick over the spec's eligible endpoints
// (healthy, not degraded: docs/TOPOLOGY.md) that leaves zone src, each
// weighed by its weight for the policies that read weights (uniformly if
// all are 0) and by 1 for random and least_connections — computed from
// the spec, not from the tree.
func oracleCross(spec ServiceSpec, src string) (float64, bool) {
	byWeight := false
	if spec.Policy != "random" && spec.Policy != "least_connections" && spec.Policy != "" {
		for _, e := range spec.Endpoints {
			byWeight = byWeight || (*e.Healthy && !e.Degraded && *e.Weight > 0)
		}
	}
	var total, out float64
	for _, e := range spec.Endpoints {
		if !*e.Healthy || e.Degraded {
			continue
		}
		w := 1.0
		if byWeight {
			w = float64(*e.Weight)
		}
		total += w
		if e.Locality["zone"] != src {
			out += w
		}
	}
	return out / total, total > 0
}

// TestDestinationsOracle: every endpoint of a built service (eligible,
// degraded, unhealthy, network copies) has the zone its spec gave it, in
// Destinations and by ValueAt's walk (but for the copies) (or
// UnknownValue when no eligible endpoint has that zone: the tree stores
// the values of the eligible endpoints' tree only), its
// match depth against a random source is the spec's count of leading
// equal scopes, and the no-locality cross share is oracleCross's, from
// Destinations' table and from the tree walk alike.
func TestDestinationsOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 2))
	for round := range 300 {
		policy := []string{"random", "weighted", "round_robin", "least_request", "least_connections", "consistent_hash"}[round%6]
		spec := trafficSpec(rng, policy, round%3 == 1, round%3 == 2)
		tree, err := Build(&Topology{Services: []ServiceSpec{spec}}, BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		svc := tree.Services()[0]
		d := svc.Destinations("zone")
		src := Locality{"network": "n0", "region": fmt.Sprint("r", rng.IntN(3)), "zone": fmt.Sprint("z", rng.IntN(4))}
		byAddr, named := map[string]EndpointSpec{}, map[string]bool{}
		for _, e := range spec.Endpoints {
			byAddr[e.Address] = e
			named[e.Locality["zone"]] = named[e.Locality["zone"]] || (*e.Healthy && !e.Degraded)
		}
		for i := svc.FirstEndpoint(); i < uint32(tree.NumEndpoints()); i++ { // with the network rule's copies
			e := byAddr[tree.Endpoint(i).Addr.String()]
			zone := e.Locality["zone"]
			if !named[zone] { // only the eligible endpoints' tree stores values
				zone = UnknownValue
			}
			if got := d.Value(i); got != zone {
				t.Fatalf("round %d (%s): endpoint %d (%s) in zone %q, want %q", round, policy, i, e.Address, got, zone)
			}
			walked := zone
			if i >= svc.FirstEndpoint()+svc.EndpointCount() {
				walked = UnknownValue // ValueAt does not follow the network rule's copies
			}
			if got := svc.ValueAt(i, len(spec.Scopes)-1); got != walked {
				t.Fatalf("round %d (%s): ValueAt(%d) (%s) = %q, want %q", round, policy, i, e.Address, got, walked)
			}
			want := 0
			for want < len(spec.Scopes) && e.Locality[spec.Scopes[want]] == src[spec.Scopes[want]] {
				want++
			}
			if got := svc.SharedScopes(src, i); got != want {
				t.Fatalf("round %d: endpoint %s shares %d scopes with %v, want %d", round, e.Address, got, src, want)
			}
		}
		got, ok := d.NoLocalityCross(src["zone"])
		want, wantOK := oracleCross(spec, src["zone"])
		if ok != wantOK || math.Abs(got-want) > 1e-12 {
			t.Fatalf("round %d (%s): no-locality cross share from %s = %v (%v), want %v (%v)", round, policy, src["zone"], got, ok, want, wantOK)
		}
		if got, ok := svc.NoLocalityCross(len(spec.Scopes)-1, src["zone"]); ok != wantOK || math.Abs(got-want) > 1e-12 {
			t.Fatalf("round %d (%s): tree-walked no-locality cross share from %s = %v (%v), want %v (%v)", round, policy, src["zone"], got, ok, want, wantOK)
		}
	}
}

// TestDestinationsUnknownScope: a scope the service does not route by has
// no values; every pick lands in UnknownValue and there is no share.
func TestDestinationsUnknownScope(t *testing.T) {
	tree, err := Build(&Topology{Services: []ServiceSpec{{Name: "a", Scopes: []string{"region"},
		Endpoints: []EndpointSpec{{Address: "127.0.0.1:80", Locality: Locality{"region": "r1", "zone": "z1"}}}}}}, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d := tree.Services()[0].Destinations("zone")
	if d.Known() || d.Value(tree.Services()[0].FirstEndpoint()) != UnknownValue {
		t.Fatalf("zone of a region-scoped service: known %v, value %q", d.Known(), d.Value(0))
	}
	if _, ok := d.NoLocalityCross("z1"); ok {
		t.Fatal("no-locality share of an unknown scope")
	}
	if v := d.Value(1 << 30); v != UnknownValue {
		t.Fatalf("value of an index past the service: %q", v)
	}
}
