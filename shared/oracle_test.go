package shared

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// oracle is the ztunnel rule, written independently of the tree: rank every
// eligible endpoint by the length of the matching scope prefix, keep the
// maximal rank (failover) or only full matches (strict).
func oracle(spec *ServiceSpec, src Locality) (cands []string, depth int) {
	scopes := spec.Scopes
	if len(scopes) == 0 {
		scopes = DefaultScopes
	}
	best := -1
	for _, e := range spec.Endpoints {
		if e.Healthy != nil && !*e.Healthy && spec.Health != "allow_all" {
			continue
		}
		rank := 0
		for _, sc := range scopes {
			if e.Locality[sc] != src[sc] {
				break
			}
			rank++
		}
		addr := netip.MustParseAddrPort(e.Address)
		a := netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port()).String()
		switch {
		case rank > best:
			best, cands = rank, []string{a}
		case rank == best:
			cands = append(cands, a)
		}
	}
	if best < 0 {
		return nil, 0
	}
	if spec.Mode == "strict" && best < len(scopes) {
		return nil, best
	}
	slices.Sort(cands)
	return cands, best
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
			want, wantDepth := oracle(spec, src)
			r := svc.Lookup(src)
			got := rangeAddrs(tree, r)
			if !slices.Equal(got, want) {
				t.Fatalf("topology %d (%s), source %v: tree gives %v (depth %d), oracle %v (rank %d)\n%+v", it, spec.Mode, src, got, r.Depth, want, wantDepth, spec)
			}
			if len(want) > 0 && r.Depth != wantDepth {
				t.Fatalf("topology %d, source %v: depth %d, oracle rank %d", it, src, r.Depth, wantDepth)
			}
		}
	}
}
