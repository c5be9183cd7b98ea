package shared

import (
	"math/rand/v2"
	"reflect"
	"testing"
)

// TestSourceMatchesLocality holds LookupSource and LoadsSource to Lookup and
// Loads for services whose scopes mix well-known keys (which a Source keeps
// by position) and other label keys (which it matches by name), in any
// order, with sources that carry keys no scope uses.
func TestSourceMatchesLocality(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	keys := []string{"network", "cluster", "region", "zone", "subzone", "node", "topology.istio.io/cluster", "rack"}
	for it := range 3000 {
		top := randomTopology(rng)
		spec := &top.Services[0]
		rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		rename := map[string]string{}
		for i, sc := range spec.Scopes {
			rename[sc] = keys[i]
			spec.Scopes[i] = keys[i]
		}
		for i := range spec.Endpoints {
			loc := Locality{}
			for k, v := range spec.Endpoints[i].Locality {
				loc[rename[k]] = v
			}
			spec.Endpoints[i].Locality = loc
		}
		if rng.IntN(2) == 0 && spec.Mode != "strict" {
			spec.NetworkRule, spec.Spillover = "plain", &SpilloverSpec{}
		}
		tree, err := Build(top, BuildOptions{})
		if err != nil {
			t.Fatalf("topology %d: %v", it, err)
		}
		svc := tree.Services()[0]
		for range 4 {
			src := randomSource(rng, keys) // every key, used by a scope or not
			if got, want := svc.LookupSource(NewSource(src)), svc.Lookup(src); got != want {
				t.Fatalf("topology %d, scopes %v, source %v: LookupSource %+v, Lookup %+v", it, spec.Scopes, src, got, want)
			}
			var got Loads
			svc.LoadsSource(NewSource(src), &got)
			if want := svc.Loads(src); !reflect.DeepEqual(got, want) {
				t.Fatalf("topology %d, scopes %v, source %v: LoadsSource %+v, Loads %+v", it, spec.Scopes, src, got, want)
			}
		}
	}
}
