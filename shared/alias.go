package shared

import "math/bits"

// aliasTable draws an index by integer weights in O(1): Vose's alias
// method (M. D. Vose, "A linear algorithm for generating random numbers
// with a given distribution", IEEE TSE 17(9), 1991) in integers, so that
// index i comes out with probability exactly w[i]/Σw: column c keeps
// prob[c] of total for itself and gives the rest to alias[c]. A draw is
// one multiply for the column and one for the coin, no search.
type aliasTable struct {
	prob  []uint64
	alias []uint32
	total uint64
}

// newAliasTable builds the table of w (each weight below 2^40, fewer than
// 2^24 of them, so that w·len(w) fits in 64 bits).
func newAliasTable(w []uint64) aliasTable {
	t := aliasTable{prob: make([]uint64, len(w)), alias: make([]uint32, len(w))}
	for _, x := range w {
		t.total += x
	}
	if t.total == 0 {
		return t
	}
	p := make([]uint64, len(w)) // w scaled by n: the columns hold total each
	var small, large []int
	for i, x := range w {
		p[i] = x * uint64(len(w))
		if p[i] < t.total {
			small = append(small, i)
		} else {
			large = append(large, i)
		}
	}
	t.pair(p, small, large)
	return t
}

// pair fills each small column with a large one until one list is empty;
// with exact integers the columns left hold total each.
func (t *aliasTable) pair(p []uint64, small, large []int) {
	for len(small) > 0 && len(large) > 0 {
		s, l := small[len(small)-1], large[len(large)-1]
		small = small[:len(small)-1]
		t.prob[s], t.alias[s] = p[s], uint32(l)
		if p[l] -= t.total - p[s]; p[l] < t.total {
			large, small = large[:len(large)-1], append(small, l)
		}
	}
	for _, i := range append(small, large...) {
		t.prob[i], t.alias[i] = t.total, uint32(i)
	}
}

// draw turns a uniform 64-bit number into an index; false when every
// weight is 0. The column is the high word of r·n (Lemire), the coin the
// low word, uniform within the column up to n/2^64.
func (t *aliasTable) draw(r uint64) (int, bool) {
	if t.total == 0 {
		return 0, false
	}
	col, lo := bits.Mul64(r, uint64(len(t.prob)))
	if coin, _ := bits.Mul64(lo, t.total); coin >= t.prob[col] {
		return int(t.alias[col]), true
	}
	return int(col), true
}
