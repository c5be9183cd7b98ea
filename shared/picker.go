package shared

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/loctree/loctree/shared/wire"
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
	tree *Tree
	src  *source
	rr   []atomic.Uint64 // by absolute node index, then aux node index (Range.Node)
	pool pool            // by absolute endpoint index
	// hashed: pool.hashes are filled (made when the tree has a
	// consistent_hash service, or at the first such pick); runs:
	// pool.sameTo is filled (consistent_hash, and round_robin and
	// least_request, which run Envoy's schedule over unequal weights).
	hashed  sync.Once
	runs    sync.Once
	counted sync.Once  // pool.counts is made (at the first Inc)
	n       int        // endpoints
	loads   *nodeLoads // per-node in-flight counts of load-aware services (load_aware.go); nil without one
}

// inFlight is the in-flight counts, made at the first call: a tree whose
// users never count (no least_request or least_connections) goes without
// them.
func (p *Picker) inFlight() []counter {
	if c := p.pool.counts.Load(); c != nil {
		return *c
	}
	return p.makeCounts()
}

// makeCounts makes the in-flight counts once (apart from inFlight, so
// that inFlight inlines on the request path).
func (p *Picker) makeCounts() []counter {
	p.counted.Do(func() {
		c := make([]counter, p.n)
		p.pool.counts.Store(&c)
	})
	return *p.pool.counts.Load()
}

// NewPicker returns a picker over the endpoints of t.
func NewPicker(t *Tree, opts PickerOptions) *Picker {
	p := &Picker{
		tree:  t,
		src:   newSource(opts.Seed),
		rr:    make([]atomic.Uint64, t.NumNodes()+len(t.aux)/wire.NodeRecordSize),
		n:     t.NumEndpoints(),
		pool:  pool{recs: t.eps, edf: newEdfTable()},
		loads: newNodeLoads(t),
	}
	for i := range t.services {
		p.needs(t.services[i].policy)
	}
	return p
}

// needs makes sure what policy pol reads is there: consistent_hash the
// address hashes (8 bytes an endpoint), it and the policies that weigh by
// Envoy's schedule the runs of equal weights (4 bytes an endpoint). A tree
// whose policies need neither goes without them.
func (p *Picker) needs(pol Policy) {
	switch pol {
	case PolicyConsistentHash:
		p.hashed.Do(p.indexHashes)
		p.runs.Do(p.indexRuns)
	case PolicyRoundRobin, PolicyLeastRequest:
		p.runs.Do(p.indexRuns)
	}
}

// indexHashes fills the address hashes.
func (p *Picker) indexHashes() {
	t := p.tree
	p.pool.hashes = make([]uint64, t.NumEndpoints())
	for i := range p.pool.hashes {
		p.pool.hashes[i] = addrRecordHash(t.eps[i*wire.EndpointRecordSize:][:wire.EndpointRecordSize])
	}
}

// indexRuns fills the runs of equal weights, per set of each service.
func (p *Picker) indexRuns() {
	t := p.tree
	p.pool.sameTo = make([]uint32, t.NumEndpoints())
	for _, s := range t.services {
		p.pool.indexWeights(s.lay.EpFirst, s.lay.EpFirst+s.lay.EpTotal)
		p.pool.indexWeights(s.lay.EpFirst+s.lay.EpTotal, s.lay.EpFirst+s.lay.EpTotal+s.netCopies())
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
//   - round_robin: as Envoy's: with equal weights an exact rotation per tree
//     node (r.Node); with unequal weights Envoy's earliest deadline first
//     schedule by weight (edf.go), one per candidate list.
//   - least_request: as Envoy's: with equal weights the less loaded of two
//     independent random draws (P2C on the in-flight counts kept by Inc and
//     Done); with unequal weights the schedule by weight / (in flight + 1).
//   - least_connections: the fewest in flight, ties broken uniformly; O(range).
//   - consistent_hash: weighted rendezvous (highest random weight) hashing of
//     key (see HashKey) against the endpoint addresses, so removing one of K
//     endpoints moves only the keys that were on it, about 1/K. O(range): one
//     hash per candidate; with unequal weights also a logarithm for the
//     candidates that can still win (O(log range) of them on average).
//
// key is used by consistent_hash only. Pick returns false when the range is
// empty or s and r do not belong to the picker's tree. It allocates nothing,
// but for the first pick of a candidate list with a schedule (edf.go).
func (p *Picker) Pick(s *Service, r Range, key uint64) (uint32, bool) {
	if r.Lo >= r.Hi || int(r.Hi) > p.n || int(r.Node) >= len(p.rr) || s.tree != p.tree {
		return 0, false
	}
	p.needs(s.policy)
	return p.pool.pick(s.policy, r.Lo, r.Hi, key, p.src, &p.rr[r.Node]), true
}

// Inc counts one more request or connection in flight to endpoint ep (an
// absolute index); least_request and least_connections read the counts,
// and so does Widen, through the counts of the nodes on ep's path (one add
// a level). Out-of-range indices are ignored.
func (p *Picker) Inc(ep uint32) { p.add(ep, 1) }

// add counts n more in flight to endpoint ep, and to the nodes on its path.
func (p *Picker) add(ep uint32, n int32) {
	if int(ep) < p.n {
		p.inFlight()[ep].Add(n)
		if p.loads != nil {
			p.loads.add(ep, n)
		}
	}
}

// Done ends one request or connection counted by Inc. Counts never go below 0.
func (p *Picker) Done(ep uint32) {
	if c := p.pool.counts.Load(); c != nil && int(ep) < len(*c) && decrement32(&(*c)[ep]) && p.loads != nil {
		p.loads.add(ep, -1)
	}
}

// InFlight is the current count of endpoint ep.
func (p *Picker) InFlight(ep uint32) int64 {
	if c := p.pool.counts.Load(); c != nil && int(ep) < len(*c) {
		return int64((*c)[ep].Load())
	}
	return 0
}

// decrement32 takes one from c unless it is 0, and says whether it did.
func decrement32(c *counter) bool {
	for {
		v := c.Load()
		if v <= 0 {
			return false
		}
		if c.CompareAndSwap(v, v-1) {
			return true
		}
	}
}

func decrement(c *atomic.Int64) {
	for {
		v := c.Load()
		if v <= 0 || c.CompareAndSwap(v, v-1) {
			return
		}
	}
}

// addrRecordHash hashes the address of an endpoint record (address bytes,
// port and family; not the flags, so a health change under allow_all keeps
// the keys in place), so consistent_hash picks survive rebuilds of the tree.
func addrRecordHash(b []byte) uint64 {
	portFamily := uint64(le.Uint16(b[wire.EPort:])) | uint64(b[wire.EFamily])<<16
	return mix64(mix64(le.Uint64(b[wire.EAddr:])^portFamily) ^ le.Uint64(b[wire.EAddr+8:]))
}

// addrHash is the consistent_hash identity of a Balancer's endpoint: the
// hash of the endpoint record an "ip:port" address encodes to (the same as
// a Picker's for the same endpoint, so both map a key to the same address),
// else HashKey of the address string.
func addrHash(addr string) uint64 {
	ap, err := parseAddr(addr)
	if err != nil {
		return HashKey(addr)
	}
	var rec [wire.EndpointRecordSize]byte
	putAddr(rec[wire.EAddr:], rec[wire.EPort:], &rec[wire.EFamily], ap)
	return addrRecordHash(rec[:])
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

// unitOpen maps a hash to a float64 uniform in the open interval (0, 1).
func unitOpen(h uint64) float64 { return (float64(h>>11) + 0.5) / (1 << 53) }

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

// pool is what the policies read about endpoints, by index: their records
// (for weight and cum_weight), address hashes and in-flight counts. The
// Picker's pool reads the tree's records; a Balancer builds its own.
type pool struct {
	recs   []byte          // wire.EndpointRecordSize bytes an endpoint
	hashes []uint64        // address hashes, for consistent_hash (a Picker's: nil without such a service)
	sameTo []uint32        // consistent_hash, round_robin, least_request: sameTo[i]: the first j > i whose weight differs from i's (or the set's end)
	counts counters        // a Picker's in-flight counts (4 bytes an endpoint), made at the first Inc
	shared []*atomic.Int64 // in-flight counts shared between versions of a Balancer's set
	edf    *edfTable       // schedules of round_robin and least_request over unequal weights
}

func (p *pool) weight(i uint32) uint32 {
	return le.Uint32(p.recs[int(i)*wire.EndpointRecordSize+wire.EWeight:])
}

// cumWeight is the sum of the weights of the set (service) up to and including i.
func (p *pool) cumWeight(i uint32) uint64 {
	return le.Uint64(p.recs[int(i)*wire.EndpointRecordSize+wire.ECumWeight:])
}

func (p *pool) load(i uint32) int64 {
	if p.shared != nil {
		return p.shared[i].Load()
	}
	if c := p.counts.Load(); c != nil {
		return int64((*c)[i].Load())
	}
	return 0 // nothing counted yet
}

// indexWeights fills sameTo for the endpoints [lo, hi) of one set.
func (p *pool) indexWeights(lo, hi uint32) {
	for i := int64(hi) - 1; i >= int64(lo); i-- {
		j := uint32(i) + 1
		if j < hi && p.weight(j) == p.weight(uint32(i)) {
			p.sameTo[i] = p.sameTo[j]
		} else {
			p.sameTo[i] = j
		}
	}
}

// pick applies a policy to the candidates [lo, hi); lo < hi.
func (p *pool) pick(pol Policy, lo, hi uint32, key uint64, src *source, rr *atomic.Uint64) uint32 {
	n := hi - lo
	switch pol {
	case PolicyWeighted:
		return p.pickWeighted(lo, hi, src)
	case PolicyRoundRobin, PolicyLeastRequest:
		if p.edf != nil && p.sameTo[lo] < hi {
			sp := [1]Span{{Lo: lo, Hi: hi}}
			return p.pickEDF(pol, sp[:], rr, src)
		}
		if pol == PolicyLeastRequest {
			return p.pickTwo(lo, n, src)
		}
		return lo + uint32((rr.Add(1)-1)%uint64(n))
	case PolicyLeastConnections:
		return p.pickLeast(lo, hi, src)
	case PolicyConsistentHash:
		if p.sameTo[lo] >= hi {
			return p.pickHashEqual(lo, hi, key)
		}
		return p.pickHashWeighted(lo, hi, key)
	}
	return lo + src.below(n)
}

// pickWeighted draws x in [0, W) and finds the endpoint whose slice of the
// cumulative weights holds it: the first i with cum[i] - base > x.
func (p *pool) pickWeighted(lo, hi uint32, src *source) uint32 {
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

// pickTwo is Envoy's least request with equal weights
// (unweightedHostPickNChoices, choice_count 2; least_request_lb.cc at
// 3b0bcb125b34): two independent draws, which may be the same endpoint; the
// second wins only with fewer in flight.
func (p *pool) pickTwo(lo, n uint32, src *source) uint32 {
	a, b := src.below(n), src.below(n)
	if p.load(lo+b) < p.load(lo+a) {
		return lo + b
	}
	return lo + a
}

// pickLeast scans for the fewest in flight, then picks uniformly among the
// candidates that have it. If the counts change between the two passes, it
// falls back to the first minimum seen.
func (p *pool) pickLeast(lo, hi uint32, src *source) uint32 {
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

// pickHashEqual is rendezvous hashing for candidates of equal weight: every
// candidate scores hash(key, address) and the highest score wins.
func (p *pool) pickHashEqual(lo, hi uint32, key uint64) uint32 {
	best, bestH := lo, uint64(0)
	for i, h := range p.hashes[lo:hi] {
		if s := mix64(key ^ h); s >= bestH {
			best, bestH = lo+uint32(i), s
		}
	}
	return best
}

// pickHashWeighted is weighted rendezvous hashing: the score ln(u)/weight (u
// uniform in (0,1) from the same hash) gives each candidate a share of keys
// proportional to its weight. With equal weights it orders candidates as the
// raw hashes do, so both paths agree. Weight-0 candidates never win; the
// weights are not all equal here, so some weight is non-zero. Since
// ln(u) <= u-1, a candidate whose (u-1)/weight does not beat the best score so
// far cannot win, and its logarithm is skipped: only O(log range) logarithms
// are computed on average.
func (p *pool) pickHashWeighted(lo, hi uint32, key uint64) uint32 {
	best, bestS := lo, math.Inf(-1)
	for i := lo; i < hi; i++ {
		w := p.weight(i)
		if w == 0 {
			continue
		}
		u := unitOpen(mix64(key ^ p.hashes[i]))
		if (u-1)/float64(w) <= bestS {
			continue
		}
		if s := math.Log(u) / float64(w); s > bestS {
			best, bestS = i, s
		}
	}
	return best
}
