package shared

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/loctree/loctree/shared/wire"
)

// Balancer is a plain load balancer over a set of addresses, for any Go
// proxy: Add and Remove endpoints, Balance picks one by the policy, Inc and
// Done count requests in flight. It knows nothing of localities (see
// LocalityBalancer for that). Balance, Inc and Done are lock-free; Add and
// Remove copy the set. A Balancer is safe for concurrent use.
type Balancer struct {
	policy Policy
	src    *source
	rr     atomic.Uint64
	mu     sync.Mutex // serialises Add and Remove
	set    atomic.Pointer[endpointSet]
}

// endpointSet is one immutable version of a Balancer's endpoints.
type endpointSet struct {
	addrs   []string
	weights []uint32
	pool    pool // records with weight and cum_weight; counts shared between versions
	index   map[string]int
}

// errEmptyAddress is returned by Add for an empty address.
var errEmptyAddress = errors.New("balancer: add: empty endpoint address")

// NewBalancer returns an empty balancer that picks by policy (an unknown
// policy value picks at random).
func NewBalancer(policy Policy) *Balancer {
	b := &Balancer{policy: policy, src: newSource(0)}
	b.set.Store(&endpointSet{index: map[string]int{}})
	return b
}

// Add adds an endpoint of weight 1. It returns an error wrapping
// ErrDuplicateEndpoint if addr is already there.
func (b *Balancer) Add(addr string) error { return b.AddWeighted(addr, 1) }

// AddWeighted adds an endpoint with a weight for the weighted,
// consistent_hash, round_robin and least_request policies (0: never picked
// while another weight is non-zero; round_robin and least_request weigh as
// Envoy does, see Picker.Pick).
// It returns an error wrapping ErrDuplicateEndpoint if addr is already there.
func (b *Balancer) AddWeighted(addr string, weight uint32) error {
	if addr == "" {
		return errEmptyAddress
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	old := b.set.Load()
	if _, ok := old.index[addr]; ok {
		return fmt.Errorf("balancer: add %q: %w", addr, ErrDuplicateEndpoint)
	}
	addrs := append(slices.Clip(old.addrs), addr)
	weights := append(slices.Clip(old.weights), weight)
	loads := append(slices.Clip(old.pool.shared), new(atomic.Int64))
	b.set.Store(newEndpointSet(addrs, weights, loads))
	return nil
}

// Remove removes an endpoint. It returns an error wrapping ErrUnknownEndpoint
// if addr is not there.
func (b *Balancer) Remove(addr string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	old := b.set.Load()
	i, ok := old.index[addr]
	if !ok {
		return fmt.Errorf("balancer: remove %q: %w", addr, ErrUnknownEndpoint)
	}
	addrs := slices.Delete(slices.Clone(old.addrs), i, i+1)
	weights := slices.Delete(slices.Clone(old.weights), i, i+1)
	loads := slices.Delete(slices.Clone(old.pool.shared), i, i+1)
	b.set.Store(newEndpointSet(addrs, weights, loads))
	return nil
}

func newEndpointSet(addrs []string, weights []uint32, loads []*atomic.Int64) *endpointSet {
	n := len(addrs)
	s := &endpointSet{
		addrs: addrs, weights: weights, index: make(map[string]int, n),
		pool: pool{
			recs:   make([]byte, n*wire.EndpointRecordSize),
			hashes: make([]uint64, n),
			sameTo: make([]uint32, n),
			shared: loads,
			edf:    newEdfTable(),
		},
	}
	var cum uint64
	for i, a := range addrs {
		cum += uint64(weights[i])
		rec := s.pool.recs[i*wire.EndpointRecordSize:]
		le.PutUint32(rec[wire.EWeight:], weights[i])
		le.PutUint64(rec[wire.ECumWeight:], cum)
		s.pool.hashes[i], s.index[a] = addrHash(a), i
	}
	s.pool.indexWeights(0, uint32(n))
	return s
}

// Balance picks an endpoint. key is hashed (HashKey) and used by the
// consistent_hash policy only. It returns ErrNoCandidate when the balancer is
// empty.
func (b *Balancer) Balance(key string) (string, error) {
	s := b.set.Load()
	n := uint32(len(s.addrs))
	if n == 0 {
		return "", ErrNoCandidate
	}
	var k uint64
	if b.policy == PolicyConsistentHash {
		k = HashKey(key)
	}
	return s.addrs[s.pool.pick(b.policy, 0, n, k, b.src, &b.rr)], nil
}

// Inc counts one more request in flight to addr; unknown addresses are ignored.
func (b *Balancer) Inc(addr string) {
	if c := b.set.Load().counter(addr); c != nil {
		c.Add(1)
	}
}

// Done ends one request counted by Inc; counts never go below 0.
func (b *Balancer) Done(addr string) {
	if c := b.set.Load().counter(addr); c != nil {
		decrement(c)
	}
}

// InFlight is the current count of addr (0 if unknown).
func (b *Balancer) InFlight(addr string) int64 {
	if c := b.set.Load().counter(addr); c != nil {
		return c.Load()
	}
	return 0
}

// Endpoints returns the addresses in the order they were added.
func (b *Balancer) Endpoints() []string { return slices.Clone(b.set.Load().addrs) }

func (s *endpointSet) counter(addr string) *atomic.Int64 {
	if i, ok := s.index[addr]; ok {
		return s.pool.shared[i]
	}
	return nil
}
