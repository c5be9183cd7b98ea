package shared

import (
	"math/rand/v2"
	"testing"
)

// TestAliasTableExact: every column gives prob to itself and total−prob
// to its alias; summed per index that is exactly w[i]·n, so a uniform
// column and coin draw index i with probability w[i]/Σw, for random
// weights (zeros included) up to 2^40.
func TestAliasTableExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(26, 40))
	for it := range 3000 {
		w := make([]uint64, 1+rng.IntN(80))
		for i := range w {
			switch rng.IntN(4) {
			case 0:
			case 1:
				w[i] = 1 + rng.Uint64N(5)
			default:
				w[i] = rng.Uint64N(1 << 40)
			}
		}
		tab := newAliasTable(w)
		got := make([]uint64, len(w))
		for c := range w {
			got[c] += tab.prob[c]
			got[tab.alias[c]] += tab.total - tab.prob[c]
		}
		for i := range w {
			if tab.total > 0 && got[i] != w[i]*uint64(len(w)) {
				t.Fatalf("case %d: index %d gets %d of %d·%d, want %d (weights %v)", it, i, got[i], tab.total, len(w), w[i]*uint64(len(w)), w)
			}
		}
		if _, ok := tab.draw(rng.Uint64()); ok != (tab.total > 0) {
			t.Fatalf("case %d: draw ok %v with total %d", it, ok, tab.total)
		}
	}
}

// TestAliasTableDraws: the draws of a small table follow the weights
// (chi-square at z = 4.75), never an index of weight 0.
func TestAliasTableDraws(t *testing.T) {
	w := []uint64{3, 0, 1, 6, 10}
	tab := newAliasTable(w)
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 200000
	counts := make([]int, len(w))
	for range n {
		i, _ := tab.draw(rng.Uint64())
		counts[i]++
	}
	chi2 := 0.0
	for i, c := range counts {
		if w[i] == 0 {
			if c > 0 {
				t.Fatalf("index %d of weight 0 drawn %d times", i, c)
			}
			continue
		}
		e := float64(n) * float64(w[i]) / 20
		chi2 += (float64(c) - e) * (float64(c) - e) / e
	}
	if chi2 > chi2AtZ(3, 4.75) {
		t.Fatalf("counts %v for weights %v: chi-square %.1f", counts, w, chi2)
	}
}
