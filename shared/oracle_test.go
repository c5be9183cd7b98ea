package shared

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// oracle is ztunnel's rule, written independently of the tree from
// istio/ztunnel src/state.rs ProxyState::load_balance at 62d82653: with
// network as the first routing preference (lines 438-439), a network mismatch
// does not stop the rank, the rank goes on over the other scopes (lines
// 463-471, "try the other scopes"), and a same-network endpoint gets
// len(scopes)-1 added after the strict check (lines 483-489); the candidates
// are the endpoints of the maximal rank (lines 493-498). plain turns the
// network preference off (ztunnel before 2d8e90ee, loctree's network_rule:
// plain). It returns the candidates' addresses and the number of scopes
// they share with the source (after network when crossNetwork).
func oracle(spec *ServiceSpec, src Locality) (cands []string, depth int, crossNetwork bool) {
	scopes := spec.Scopes
	if len(scopes) == 0 {
		scopes = DefaultScopes()
	}
	networkPreferred := scopes[0] == "network" && spec.NetworkRule != "plain"
	best, bestMatched, bestCross := -1, 0, false
	for _, e := range spec.Endpoints {
		if e.Healthy != nil && !*e.Healthy && spec.Health != "allow_all" {
			continue
		}
		rank, adjust, cross := 0, 0, false
		for _, sc := range scopes {
			m := e.Locality[sc] == src[sc]
			if sc == "network" && networkPreferred {
				if !m {
					cross = true
					continue
				}
				adjust = len(scopes) - 1
			}
			if !m {
				break
			}
			rank++
		}
		if spec.Mode == "strict" && rank != len(scopes) {
			continue
		}
		matched := rank
		rank += adjust
		addr := netip.MustParseAddrPort(e.Address)
		a := netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port()).String()
		switch {
		case rank > best:
			best, bestMatched, bestCross, cands = rank, matched, cross, []string{a}
		case rank == best:
			cands = append(cands, a)
		}
	}
	if best < 0 {
		return nil, 0, false
	}
	slices.Sort(cands)
	return cands, bestMatched, bestCross
}

func rangeAddrs(t *Tree, r Range) []string {
	var out []string
	for i := r.Lo; i < r.Hi; i++ {
		out = append(out, t.Endpoint(i).Addr.String())
	}
	slices.Sort(out)
	return out
}

// randomTopology makes one service with small value alphabets so that sources
// match at every depth, with some unhealthy and some missing values.
func randomTopology(rng *rand.Rand) *Topology {
	allScopes := []string{"network", "region", "zone", "subzone", "node", "cluster", "topology.istio.io/cluster", "rack"}
	levels := 1 + rng.IntN(5)
	if rng.IntN(20) == 0 {
		levels = MaxLevels
	}
	spec := ServiceSpec{Name: "svc", Scopes: allScopes[:levels]}
	if rng.IntN(3) == 0 {
		spec.Mode = "strict"
	}
	if rng.IntN(5) == 0 {
		spec.Health = "allow_all"
	}
	if rng.IntN(6) == 0 {
		spec.NetworkRule = "plain"
	}
	n := rng.IntN(40)
	for i := range n {
		loc := Locality{}
		for _, sc := range spec.Scopes {
			if v := rng.IntN(4); v > 0 {
				loc[sc] = fmt.Sprintf("%s-%d", sc, v)
			}
		}
		e := EndpointSpec{Locality: loc}
		if rng.IntN(2) == 0 {
			e.Address = fmt.Sprintf("127.0.%d.%d:%d", i/200, i%200+1, 8000+rng.IntN(3))
		} else {
			e.Address = fmt.Sprintf("[fd00::%x]:%d", i+1, 9000)
		}
		if rng.IntN(4) == 0 {
			f := false
			e.Healthy = &f
		}
		spec.Endpoints = append(spec.Endpoints, e)
	}
	return &Topology{Services: []ServiceSpec{spec}}
}

func randomSource(rng *rand.Rand, scopes []string) Locality {
	src := Locality{}
	for _, sc := range scopes {
		sc, _, _ = strings.Cut(sc, "=") // a proxy has the label, never an Istio override "k=v"
		if v := rng.IntN(5); v > 0 {
			src[sc] = fmt.Sprintf("%s-%d", sc, v) // value 4 never exists in a tree
		}
	}
	return src
}

// TestLookupMatchesOracle is the property test of DESIGN.md's contract: for
// random topologies and sources, the tree's candidate range is exactly the
// ztunnel rule's candidate set.
func TestLookupMatchesOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const topologies, sources = 10000, 4
	cross, differ := 0, 0 // pairs the network rule answered; those where it matched a scope after network
	for it := range topologies {
		top := randomTopology(rng)
		tree, err := Build(top, BuildOptions{Generation: uint64(it)})
		if err != nil {
			t.Fatalf("topology %d: %v", it, err)
		}
		spec := &top.Services[0]
		svc, ok := tree.Service("svc")
		if !ok {
			t.Fatal("service not found")
		}
		for range sources {
			src := randomSource(rng, spec.Scopes)
			want, wantDepth, wantCross := oracle(spec, src)
			wantCross = wantCross && len(spec.Scopes) > 1 // with network alone every endpoint is a candidate either way
			r := svc.Lookup(src)
			got := rangeAddrs(tree, r)
			if !slices.Equal(got, want) {
				t.Fatalf("topology %d (%s), source %v: tree gives %v (depth %d), oracle %v (depth %d)\n%+v", it, spec.Mode, src, got, r.Depth, want, wantDepth, spec)
			}
			if len(want) > 0 && (r.Depth != wantDepth || svc.CrossNetwork(r) != wantCross) {
				t.Fatalf("topology %d, source %v: depth %d (cross-network %v), oracle %d (%v)", it, src, r.Depth, svc.CrossNetwork(r), wantDepth, wantCross)
			}
			if ls := svc.LookupSource(NewSource(src)); ls != r {
				t.Fatalf("topology %d, source %v: LookupSource %+v, Lookup %+v", it, src, ls, r)
			}
			if wantCross && len(want) > 0 {
				cross++
				if wantDepth > 0 {
					differ++ // the plain rule would give every eligible endpoint
				}
			}
		}
	}
	if cross < 2000 || differ < 1000 {
		t.Fatalf("only %d of %d pairs took the network rule, %d matched after network", cross, topologies*sources, differ)
	}
	t.Logf("%d pairs, %d answered by the network rule, %d of them matching scopes after network", topologies*sources, cross, differ)
}
