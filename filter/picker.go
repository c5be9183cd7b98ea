package main

import (
	"math/rand/v2"

	"github.com/loctree/loctree/shared"
)

// pick chooses one endpoint of the candidate range r with the service's
// policy. key is the consistent-hash key (hasKey false: none).
func (st *treeState) pick(svc *shared.Service, r shared.Range, key uint64, hasKey bool) uint32 {
	n := uint32(r.Len())
	switch svc.Policy {
	case shared.PolicyWeighted:
		return st.pickWeighted(r)
	case shared.PolicyRoundRobin:
		st.rr[svc.Index]++
		return r.Lo + uint32(st.rr[svc.Index]%uint64(n))
	case shared.PolicyLeastRequest, shared.PolicyLeastConnections:
		a, b := r.Lo+st.randN(n), r.Lo+st.randN(n)
		if st.inflight[b] < st.inflight[a] {
			return b
		}
		return a
	case shared.PolicyConsistentHash:
		if hasKey {
			return r.Lo + uint32(jumpHash(key, int32(n)))
		}
	}
	return r.Lo + st.randN(n)
}

// pickWeighted draws an endpoint with probability weight/total using the
// prefix sums of the endpoint records.
func (st *treeState) pickWeighted(r shared.Range) uint32 {
	t := st.tree
	first := t.Endpoint(r.Lo)
	base := first.CumWeight - uint64(first.Weight)
	total := t.Endpoint(r.Hi-1).CumWeight - base
	if total == 0 {
		return r.Lo + st.randN(uint32(r.Len()))
	}
	x := base + rand.Uint64N(total)
	lo, hi := r.Lo, r.Hi-1
	for lo < hi { // first endpoint whose cum_weight > x
		mid := lo + (hi-lo)/2
		if t.Endpoint(mid).CumWeight > x {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// jumpHash is Lamping and Veach's jump consistent hash.
func jumpHash(key uint64, buckets int32) int32 {
	var b, j int64 = -1, 0
	for j < int64(buckets) {
		b = j
		key = key*2862933555777941757 + 1
		j = int64(float64(b+1) * (float64(int64(1)<<31) / float64((key>>33)+1)))
	}
	return int32(b)
}

// fallbacks returns up to n further distinct candidates after primary, in
// ring order inside r.
func fallbacks(r shared.Range, primary uint32, n int) []uint32 {
	size := uint32(r.Len())
	var out []uint32
	for k := uint32(1); k < size && len(out) < n; k++ {
		out = append(out, r.Lo+(primary-r.Lo+k)%size)
	}
	return out
}
