package kernel

import (
	"math/rand/v2"
	"testing"
)

// TestAllocator checks that regions never overlap and that freeing
// everything restores one free span.
func TestAllocator(t *testing.T) {
	const size = 1000
	a := newAllocator(size)
	rng := rand.New(rand.NewPCG(1, 1))
	used := map[uint32]span{}
	owner := make([]int, size)
	for it := range 5000 {
		if len(used) > 0 && rng.IntN(2) == 0 {
			for k, s := range used {
				a.release(s)
				for i := s.start; i < s.start+s.len; i++ {
					owner[i] = 0
				}
				delete(used, k)
				break
			}
			continue
		}
		n := uint32(1 + rng.IntN(60))
		start, ok := a.alloc(n)
		if !ok {
			if a.available() >= n && len(a.free) == 1 {
				t.Fatalf("alloc %d failed with %d free in one span", n, a.available())
			}
			continue
		}
		for i := start; i < start+n; i++ {
			if owner[i] != 0 {
				t.Fatalf("iteration %d: entry %d handed out twice", it, i)
			}
			owner[i] = it + 1
		}
		used[start] = span{start, n}
	}
	for _, s := range used {
		a.release(s)
	}
	if len(a.free) != 1 || a.free[0] != (span{0, size}) {
		t.Fatalf("after releasing everything: %v", a.free)
	}
	if !a.reserve(span{10, 5}) || a.reserve(span{12, 5}) || a.available() != size-5 {
		t.Fatalf("reserve: %v", a.free)
	}
}
