package shared

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"sync/atomic"
)

// PickerOptions are the settings of a Picker.
type PickerOptions struct {
	// Seed selects the random source. 0 uses math/rand/v2's global source
	// (fast, per-thread, not reproducible). Any other value gives a
	// deterministic sequence: the same seed and the same calls in the same
	// order give the same picks. Both are safe for concurrent use.
	Seed uint64
}

// Picker picks one endpoint inside a candidate range by the service's policy.
// It keeps the state that policies need across picks: a round-robin counter per
// tree node and an in-flight count per endpoint. A Picker belongs to one tree;
// it is safe for concurrent use.
type Picker struct {
	tree     *Tree
	src      *source
	rr       []atomic.Uint64 // by absolute node index
	inflight []atomic.Int64  // by absolute endpoint index
	hashes   []uint64        // hash of every endpoint's address, for consistent_hash
	sameTo   []uint32        // sameTo[i]: first j > i whose weight differs from i's (or the service's end)
}

// NewPicker returns a picker over the endpoints of t.
func NewPicker(t *Tree, opts PickerOptions) *Picker {
	p := &Picker{
		tree:     t,
		src:      newSource(opts.Seed),
		rr:       make([]atomic.Uint64, t.NumNodes()),
		inflight: make([]atomic.Int64, t.NumEndpoints()),
		hashes:   make([]uint64, t.NumEndpoints()),
		sameTo:   make([]uint32, t.NumEndpoints()),
	}
	for i := range p.hashes {
		b := t.eps[i*EndpointRecordSize:][:EndpointRecordSize]
		p.hashes[i] = addrRecordHash(b)
	}
	for _, s := range t.services {
		p.indexWeights(s.EpFirst, s.EpFirst+s.EpTotal)
	}
	return p
}

// indexWeights fills sameTo for the endpoints [lo, hi) of one service.
func (p *Picker) indexWeights(lo, hi uint32) {
	for i := int64(hi) - 1; i >= int64(lo); i-- {
		j := uint32(i) + 1
		if j < hi && p.weight(j) == p.weight(uint32(i)) {
			p.sameTo[i] = p.sameTo[j]
		} else {
			p.sameTo[i] = j
		}
	}
}

// Tree is the tree the picker was made for.
func (p *Picker) Tree() *Tree { return p.tree }

// Pick returns the absolute index of one endpoint in [r.Lo, r.Hi), chosen by
// s.Policy:
//
//   - random: uniform.
//   - weighted: proportional to the endpoint weights (uniform if the range's
//     weights are all 0); O(log range) by the records' cumulative weights.
//   - round_robin: exact rotation per tree node (r.Node).
//   - least_request: the less loaded of two distinct random endpoints (P2C on
//     the in-flight counts kept by Inc and Done).
//   - least_connections: the fewest in flight, ties broken uniformly; O(range).
//   - consistent_hash: weighted rendezvous (highest random weight) hashing of
//     key (see HashKey) against the endpoint addresses, so removing one of K
//     endpoints moves only the keys that were on it, about 1/K. O(range): about
//     1 ns per candidate when the range's weights are equal, more otherwise.
//
// key is used by consistent_hash only. Pick returns false when the range is
// empty or s and r do not belong to the picker's tree. It allocates nothing.
func (p *Picker) Pick(s *Service, r Range, key uint64) (uint32, bool) {
	if r.Lo >= r.Hi || int(r.Hi) > len(p.inflight) || int(r.Node) >= len(p.rr) || s.tree != p.tree {
		return 0, false
	}
	return pickIn(p, s.Policy, r.Lo, r.Hi, key, p.src, &p.rr[r.Node]), true
}

// Inc counts one more request or connection in flight to endpoint ep (an
// absolute index); least_request and least_connections read the counts.
// Out-of-range indices are ignored.
func (p *Picker) Inc(ep uint32) {
	if int(ep) < len(p.inflight) {
		p.inflight[ep].Add(1)
	}
}

// Done ends one request or connection counted by Inc. Counts never go below 0.
func (p *Picker) Done(ep uint32) {
	if int(ep) < len(p.inflight) {
		decrement(&p.inflight[ep])
	}
}

// InFlight is the current count of endpoint ep.
func (p *Picker) InFlight(ep uint32) int64 {
	if int(ep) < len(p.inflight) {
		return p.inflight[ep].Load()
	}
	return 0
}

func decrement(c *atomic.Int64) {
	for {
		v := c.Load()
		if v <= 0 || c.CompareAndSwap(v, v-1) {
			return
		}
	}
}

func (p *Picker) weight(i uint32) uint32 {
	return le.Uint32(p.tree.eps[int(i)*EndpointRecordSize+eWeight:])
}

func (p *Picker) cumWeight(i uint32) uint64 {
	return le.Uint64(p.tree.eps[int(i)*EndpointRecordSize+eCumWeight:])
}

func (p *Picker) load(i uint32) int64            { return p.inflight[i].Load() }
func (p *Picker) addrHash(i uint32) uint64       { return p.hashes[i] }
func (p *Picker) sameWeights(lo, hi uint32) bool { return p.sameTo[lo] >= hi }

// addrRecordHash hashes the address bytes of an endpoint record (address,
// port, family), so a consistent_hash pick survives rebuilds of the tree.
func addrRecordHash(b []byte) uint64 {
	return mix64(mix64(le.Uint64(b[eAddr:])^uint64(le.Uint32(b[ePort:]))) ^ le.Uint64(b[eAddr+8:]))
}

func newSource(seed uint64) *source {
	s := &source{seeded: seed != 0}
	s.state.Store(seed)
	return s
}

func (s *source) next() uint64 {
	if !s.seeded {
		return rand.Uint64()
	}
	return mix64(s.state.Add(0x9e3779b97f4a7c15))
}

// below64 is uniform in [0, n) (Lemire's multiply-shift; the bias is below
// n/2^64, far under anything a test or a load balancer can see).
func (s *source) below64(n uint64) uint64 {
	hi, _ := bits.Mul64(s.next(), n)
	return hi
}

func (s *source) below(n uint32) uint32 { return uint32(s.below64(uint64(n))) }

// hrwScore is the weighted rendezvous score ln(u)/w of a hash h, u in (0, 1).
func hrwScore(h uint64, w uint32) float64 {
	u := (float64(h>>11) + 0.5) / (1 << 53)
	return math.Log(u) / float64(w)
}

// source is a random source safe for concurrent use: math/rand/v2's global
// source, or a seeded splitmix64 sequence advanced atomically.
type source struct {
	seeded bool
	state  atomic.Uint64
}

// mix64 is the splitmix64 finalizer: a bijective, well-mixing 64-bit hash.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// HashKey turns a request attribute (a header value, a source IP, a cookie)
// into the key of a consistent_hash pick. It is stable across processes and
// releases: FNV-1a 64 of the bytes, then the splitmix64 finalizer.
func HashKey(s string) uint64 { return mix64(Label(s)) }

// pool is what the policies read about candidate endpoints, by index.
type pool interface {
	weight(i uint32) uint32
	cumWeight(i uint32) uint64 // sum of the weights of the set up to and including i
	load(i uint32) int64
	addrHash(i uint32) uint64
	sameWeights(lo, hi uint32) bool // every endpoint of [lo, hi) has the same weight
}

// pickIn applies a policy to the candidates [lo, hi) of p; lo < hi.
func pickIn[P pool](p P, pol Policy, lo, hi uint32, key uint64, src *source, rr *atomic.Uint64) uint32 {
	n := hi - lo
	switch pol {
	case PolicyWeighted:
		return pickWeighted(p, lo, hi, src)
	case PolicyRoundRobin:
		return lo + uint32((rr.Add(1)-1)%uint64(n))
	case PolicyLeastRequest:
		return pickTwo(p, lo, n, src)
	case PolicyLeastConnections:
		return pickLeast(p, lo, hi, src)
	case PolicyConsistentHash:
		return pickHash(p, lo, hi, key)
	}
	return lo + src.below(n)
}

// pickWeighted draws x in [0, W) and finds the endpoint whose slice of the
// cumulative weights holds it: the first i with cum[i] - base > x.
func pickWeighted[P pool](p P, lo, hi uint32, src *source) uint32 {
	base := p.cumWeight(lo) - uint64(p.weight(lo))
	total := p.cumWeight(hi-1) - base
	if total == 0 {
		return lo + src.below(hi-lo)
	}
	target := base + src.below64(total)
	a, b := lo, hi-1 // the answer is in [a, b]; cum[hi-1] > target always
	for a < b {
		mid := a + (b-a)/2
		if p.cumWeight(mid) > target {
			b = mid
		} else {
			a = mid + 1
		}
	}
	return a
}

// pickTwo is the power of two random choices: two distinct candidates, the
// one with fewer in flight wins (the first on a tie; both are random).
func pickTwo[P pool](p P, lo, n uint32, src *source) uint32 {
	if n == 1 {
		return lo
	}
	a := src.below(n)
	b := (a + 1 + src.below(n-1)) % n
	if p.load(lo+b) < p.load(lo+a) {
		return lo + b
	}
	return lo + a
}

// pickLeast scans for the fewest in flight, then picks uniformly among the
// candidates that have it. If the counts change between the two passes, it
// falls back to the first minimum seen.
func pickLeast[P pool](p P, lo, hi uint32, src *source) uint32 {
	best, first, ties := int64(math.MaxInt64), lo, uint32(0)
	for i := lo; i < hi; i++ {
		switch v := p.load(i); {
		case v < best:
			best, first, ties = v, i, 1
		case v == best:
			ties++
		}
	}
	if ties == 1 {
		return first
	}
	k := src.below(ties)
	for i := first; i < hi; i++ {
		if p.load(i) <= best {
			if k == 0 {
				return i
			}
			k--
		}
	}
	return first
}

// pickHash is rendezvous hashing: every candidate scores hash(key, address)
// and the highest score wins. With unequal weights the score is
// ln(u)/weight (u uniform in (0,1)), which gives each candidate a share of
// keys proportional to its weight; with equal weights that order equals the
// order of the raw hashes, so the cheap integer path gives the same answer.
func pickHash[P pool](p P, lo, hi uint32, key uint64) uint32 {
	if p.sameWeights(lo, hi) {
		best, bestH := lo, uint64(0)
		for i := lo; i < hi; i++ {
			if h := mix64(key ^ p.addrHash(i)); h >= bestH {
				best, bestH = i, h
			}
		}
		return best
	}
	best, bestS := uint32(0), math.Inf(-1)
	found := false
	for i := lo; i < hi; i++ {
		w := p.weight(i)
		if w == 0 {
			continue
		}
		if s := hrwScore(mix64(key^p.addrHash(i)), w); !found || s > bestS {
			best, bestS, found = i, s, true
		}
	}
	return best // some weight is non-zero: the weights are not all equal
}
