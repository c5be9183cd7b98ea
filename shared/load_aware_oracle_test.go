package shared

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// The oracle of load-aware widening, from docs/TOPOLOGY.md ("Load-aware
// widening") and nothing of the tree: a candidate set at depth d is the
// eligible endpoints sharing the first d scope values with the source; its
// load is the sum of its endpoints' in-flight counts, O(endpoints); its state
// (wide or not) is kept per (depth, shared values).
type laOracle struct {
	eps        []EndpointSpec
	scopes     []string
	high, low  int
	limit      int
	count      map[string]int // by address
	wide       map[string]bool
	eligibleOf func(EndpointSpec) bool
}

func (o *laOracle) set(src Locality, d int) []string {
	var out []string
	for _, e := range o.eps {
		if !o.eligibleOf(e) {
			continue
		}
		match := true
		for _, sc := range o.scopes[:d] {
			match = match && e.Locality[sc] == src[sc]
		}
		if match {
			out = append(out, e.Address)
		}
	}
	slices.Sort(out)
	return out
}

func (o *laOracle) candidates(src Locality) []string {
	d := len(o.scopes)
	for d > 0 && len(o.set(src, d)) == 0 {
		d--
	}
	if d < o.limit {
		return nil
	}
	for d > o.limit && d > 0 {
		set := o.set(src, d)
		load := 0
		for _, a := range set {
			load += o.count[a]
		}
		key := fmt.Sprint(d, ":", valuesOf(src, o.scopes[:d]))
		switch {
		case load > o.high*len(set):
			o.wide[key] = true
		case load < o.low*len(set):
			o.wide[key] = false
		}
		if !o.wide[key] {
			break
		}
		d--
	}
	return o.set(src, d)
}

func valuesOf(src Locality, scopes []string) string {
	var b strings.Builder
	for _, sc := range scopes {
		b.WriteString(src[sc] + "/")
	}
	return b.String()
}

// TestWidenOracle compares Widen with the oracle on random trees and random
// sequences of request starts and finishes, from every source after every
// event.
func TestWidenOracle(t *testing.T) {
	for seed := range uint64(40) {
		widenOracleRun(t, rand.New(rand.NewPCG(seed, 25)))
	}
}

func widenOracleRun(t *testing.T, rng *rand.Rand) {
	scopes := []string{"region", "zone", "subzone"}
	var eps []EndpointSpec
	var sources []Locality
	for r := range 1 + rng.IntN(3) {
		for z := range 1 + rng.IntN(3) {
			for sz := range 1 + rng.IntN(2) {
				loc := Locality{"region": fmt.Sprint("r", r), "zone": fmt.Sprint("z", z), "subzone": fmt.Sprint("s", sz)}
				sources = append(sources, loc, Locality{"region": loc["region"], "zone": loc["zone"], "subzone": "none"})
				for range 1 + rng.IntN(4) {
					h := rng.IntN(6) != 0
					eps = append(eps, EndpointSpec{Address: fmt.Sprintf("127.0.%d.%d:80", len(eps)/200, len(eps)%200+1), Locality: loc, Healthy: &h})
				}
			}
		}
	}
	sources = append(sources, Locality{"region": "elsewhere"})
	high := uint32(2 + rng.IntN(3))
	low := uint32(1 + rng.IntN(int(high)-1))
	limit := ""
	if rng.IntN(3) == 0 {
		limit = "region"
	}
	tree, err := Build(&Topology{Services: []ServiceSpec{{Name: "a", Scopes: scopes, FailoverLimit: limit, LoadAware: band(high, low), Endpoints: eps}}}, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := tree.Services()[0]
	o := &laOracle{eps: eps, scopes: scopes, high: int(high), low: int(low), count: map[string]int{}, wide: map[string]bool{},
		eligibleOf: func(e EndpointSpec) bool { return *e.Healthy }}
	if limit != "" {
		o.limit = 1
	}
	p := NewPicker(tree, PickerOptions{Seed: 1})
	var started []uint32
	widened, narrowed := 0, 0 // lookups whose range widening changed, and back
	for step := range 600 {
		bias := 75 // loads rise, then fall: every node crosses its band both ways
		if step >= 300 {
			bias = 25
		}
		if len(started) == 0 || rng.IntN(100) < bias {
			ep := uint32(rng.IntN(tree.NumEndpoints()))
			p.Inc(ep)
			o.count[tree.Endpoint(ep).Addr.String()]++
			started = append(started, ep)
		} else {
			k := rng.IntN(len(started))
			ep := started[k]
			started = slices.Delete(started, k, k+1)
			p.Done(ep)
			o.count[tree.Endpoint(ep).Addr.String()]--
		}
		for _, src := range sources {
			r := s.Lookup(src)
			w := p.Widen(s, r)
			if w.Depth < r.Depth {
				widened++
			} else if widened > 0 && step >= 300 {
				narrowed++
			}
			var got []string
			for i := w.Lo; i < w.Hi; i++ {
				got = append(got, tree.Endpoint(i).Addr.String())
			}
			slices.Sort(got)
			if want := o.candidates(src); !slices.Equal(got, want) {
				t.Fatalf("band [%d, %d], limit %q, step %d, source %v: candidates %v, oracle %v", low, high, limit, step, src, got, want)
			}
		}
	}
	if widened == 0 || narrowed == 0 {
		t.Fatalf("band [%d, %d]: %d widened and %d narrowed lookups; the run does not cross the band both ways", low, high, widened, narrowed)
	}
}
