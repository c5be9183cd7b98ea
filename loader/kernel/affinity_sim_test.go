package kernel

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/loctree/loctree/shared"
)

// The simulation behind "Why session affinity plus jump hash" in
// RATIONALE.md: on the candidate ranges of one tree, how many clients
// change backend when one endpoint of a range leaves or one joins
// (movement), and how evenly clients spread (max/mean load), for the
// kernel's choice, rendezvous hashing and Maglev.

// simRanges are the candidate ranges (addresses, in array order) of every
// node with at least two endpoints of ten trees of 3 regions × 3 zones with
// 4..33 endpoints per zone.
func simRanges(t *testing.T) [][]string {
	var out [][]string
	for seed := range uint64(10) {
		out = append(out, treeRanges(t, rand.New(rand.NewPCG(12, seed)))...)
	}
	return out
}

func treeRanges(t *testing.T, rng *rand.Rand) [][]string {
	spec := shared.ServiceSpec{Name: "sim", Scopes: []string{"region", "zone"}}
	for r := range 3 {
		for z := range 3 {
			for i := range 4 + rng.IntN(30) {
				spec.Endpoints = append(spec.Endpoints, ep(fmt.Sprintf("10.%d.%d.%d:80", r, z, i+1), fmt.Sprint("r", r), fmt.Sprint("z", z)))
			}
		}
	}
	tree := mustBuild(t, &shared.Topology{Services: []shared.ServiceSpec{spec}}, 1)
	var out [][]string
	for i := range tree.NumNodes() {
		n := tree.Node(uint32(i))
		if n.Hi-n.Lo < 2 {
			continue
		}
		var r []string
		for e := n.Lo; e < n.Hi; e++ {
			r = append(r, tree.Endpoint(e).Addr.String())
		}
		out = append(out, r)
	}
	return out
}

// strHash is FNV-1a 64 of s, mixed.
func strHash(s string) uint64 { return mix64(shared.Label(s)) }

// picker assigns client keys to one of the endpoints of a range.
type picker func(eps []string) func(key uint64) string

func jumpPicker(eps []string) func(uint64) string {
	return func(key uint64) string { return eps[jump(key, uint32(len(eps)))] }
}

// rendezvousPicker is highest random weight hashing (Thaler and Ravishankar).
func rendezvousPicker(eps []string) func(uint64) string {
	hs := make([]uint64, len(eps))
	for i, e := range eps {
		hs[i] = strHash(e)
	}
	return func(key uint64) string {
		best, at := uint64(0), 0
		for i, h := range hs {
			if s := mix64(key ^ h); s >= best {
				best, at = s, i
			}
		}
		return eps[at]
	}
}

// maglevSize is the lookup table size M, a prime (Eisenbud et al.,
// "Maglev", NSDI'16, §3.4 uses 65537 in its evaluation, §5.3).
const maglevSize = 65537

// maglevPicker populates the table as Pseudocode 1 of §3.4: each backend
// has a permutation of the slots (offset, skip from two hashes of its
// name); backends take turns claiming their next unclaimed slot.
func maglevPicker(eps []string) func(uint64) string {
	n := len(eps)
	offset, skip, next := make([]uint64, n), make([]uint64, n), make([]uint64, n)
	for i, e := range eps {
		offset[i] = strHash(e) % maglevSize
		skip[i] = mix64(strHash(e)+1)%(maglevSize-1) + 1
	}
	entry := make([]int32, maglevSize)
	for i := range entry {
		entry[i] = -1
	}
	for filled := 0; ; {
		for i := range n {
			c := (offset[i] + next[i]*skip[i]) % maglevSize
			for entry[c] >= 0 {
				next[i]++
				c = (offset[i] + next[i]*skip[i]) % maglevSize
			}
			entry[c] = int32(i)
			next[i]++
			if filled++; filled == maglevSize {
				return func(key uint64) string { return eps[entry[key%maglevSize]] }
			}
		}
	}
}

// simResult sums one algorithm over all ranges.
type simResult struct {
	leaveMoved, leaveIdeal, joinMoved, joinIdeal float64 // fractions of clients, summed
	worstBalance, sumBalance                     float64
	ranges                                       int
}

func (r *simResult) String() string {
	n := float64(r.ranges)
	return fmt.Sprintf("leave: moved %.4f (ideal %.4f, ratio %.2f); join: moved %.4f (ideal %.4f); balance max/mean: mean %.3f, worst %.3f",
		r.leaveMoved/n, r.leaveIdeal/n, r.leaveMoved/r.leaveIdeal, r.joinMoved/n, r.joinIdeal/n, r.sumBalance/n, r.worstBalance)
}

// simulate runs clients over every range: their backends before, after a
// random endpoint leaves and after a new one joins at a random place.
// affinity: clients keep a backend that is still there (the kernel's
// affinity map), and only the others ask pick.
func simulate(ranges [][]string, clients int, pick picker, affinity bool) *simResult {
	rng := rand.New(rand.NewPCG(12, 4))
	keys := make([]uint64, clients)
	for i := range keys {
		keys[i] = rng.Uint64()
	}
	res := &simResult{}
	for _, eps := range ranges {
		before := assign(keys, pick(eps), nil, nil)
		res.addBalance(before, len(eps))
		gone := rng.IntN(len(eps))
		left := slices.Delete(slices.Clone(eps), gone, gone+1)
		after := assign(keys, pick(left), before, keepIf(affinity, left))
		res.leaveMoved += changed(before, after)
		res.leaveIdeal += share(before, eps[gone])
		at := rng.IntN(len(eps) + 1)
		joined := slices.Insert(slices.Clone(eps), at, "new")
		after = assign(keys, pick(joined), before, keepIf(affinity, joined))
		res.joinMoved += changed(before, after)
		res.joinIdeal += share(after, "new")
		res.ranges++
	}
	return res
}

func keepIf(affinity bool, eps []string) []string {
	if affinity {
		return eps
	}
	return nil
}

// assign picks for every key; a key whose earlier backend is in keep stays.
func assign(keys []uint64, pick func(uint64) string, earlier, keep []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		if earlier != nil && slices.Contains(keep, earlier[i]) {
			out[i] = earlier[i]
			continue
		}
		out[i] = pick(k)
	}
	return out
}

func changed(a, b []string) float64 {
	n := 0
	for i := range a {
		if a[i] != b[i] {
			n++
		}
	}
	return float64(n) / float64(len(a))
}

func share(a []string, ep string) float64 {
	n := 0
	for _, x := range a {
		if x == ep {
			n++
		}
	}
	return float64(n) / float64(len(a))
}

func (r *simResult) addBalance(a []string, k int) {
	load := map[string]int{}
	for _, x := range a {
		load[x]++
	}
	most := 0
	for _, v := range load {
		most = max(most, v)
	}
	b := float64(most) / (float64(len(a)) / float64(k))
	r.sumBalance += b
	r.worstBalance = max(r.worstBalance, b)
}

// TestConsistentHashMovement measures movement and balance on the same
// ranges for the kernel's choice (affinity + jump hash), jump hash alone
// (what a client without an affinity gets), rendezvous and Maglev, and
// checks the properties each one promises: with the affinity, exactly the
// clients on a leaving endpoint move and nobody moves on a join;
// rendezvous moves exactly those too; Maglev stays within twice the ideal.
func TestConsistentHashMovement(t *testing.T) {
	ranges := simRanges(t)
	const clients = 10000
	algos := []struct {
		name     string
		pick     picker
		affinity bool
	}{
		{"affinity + jump (kernel)", jumpPicker, true},
		{"jump alone", jumpPicker, false},
		{"rendezvous", rendezvousPicker, false},
		{"maglev M=65537", maglevPicker, false},
	}
	sizes := 0
	for _, r := range ranges {
		sizes += len(r)
	}
	t.Logf("%d ranges, %.1f endpoints on average, %d clients", len(ranges), float64(sizes)/float64(len(ranges)), clients)
	for _, a := range algos {
		r := simulate(ranges, clients, a.pick, a.affinity)
		t.Logf("%-26s %s", a.name, r)
		switch {
		case a.affinity && (r.leaveMoved != r.leaveIdeal || r.joinMoved != 0):
			t.Errorf("%s: moved %v on leave (ideal %v), %v on join (want 0)", a.name, r.leaveMoved, r.leaveIdeal, r.joinMoved)
		case a.name == "rendezvous" && (r.leaveMoved != r.leaveIdeal || r.joinMoved != r.joinIdeal):
			t.Errorf("rendezvous is not minimal: %s", r)
		case a.name == "maglev M=65537" && r.leaveMoved > 2*r.leaveIdeal:
			t.Errorf("maglev moved more than twice the ideal: %s", r)
		}
	}
}
