package shared

import (
	"fmt"
	"maps"
	"net/netip"
	"sync"
	"sync/atomic"
)

// LocalityBalancer balances one service for one source locality over a tree:
// the candidates are the tree's answer for the source (failover or strict, as
// the service says) and the service's policy picks among them. Update swaps in
// a new tree atomically. It is safe for concurrent use.
type LocalityBalancer struct {
	service string
	src     Locality
	opts    PickerOptions
	mu      sync.Mutex // serialises Update
	state   atomic.Pointer[localityState]
}

// localityState is everything Balance needs for one tree.
type localityState struct {
	svc    *Service
	picker *Picker
	r      Range
	loads  Loads                     // the priority loads, used when the service has spillover
	byAddr map[netip.AddrPort]uint32 // every endpoint of the service → absolute index
}

// NewLocalityBalancer returns a balancer for service (a name or host of t)
// seen from src. It returns an error wrapping ErrUnknownService if t has no
// such service.
func NewLocalityBalancer(t *Tree, service string, src Locality, opts PickerOptions) (*LocalityBalancer, error) {
	lb := &LocalityBalancer{service: service, src: maps.Clone(src), opts: opts}
	st, err := lb.newState(t)
	if err != nil {
		return nil, err
	}
	lb.state.Store(st)
	return lb, nil
}

func (lb *LocalityBalancer) newState(t *Tree) (*localityState, error) {
	svc, ok := t.Service(lb.service)
	if !ok {
		return nil, fmt.Errorf("locality balancer: %w %q in tree generation %d", ErrUnknownService, lb.service, t.Generation())
	}
	st := &localityState{
		svc:    svc,
		picker: NewPicker(t, lb.opts),
		r:      svc.Lookup(lb.src),
		byAddr: make(map[netip.AddrPort]uint32, svc.lay.EpTotal),
	}
	for i := svc.lay.EpFirst; i < svc.lay.EpFirst+svc.lay.EpTotal; i++ {
		st.byAddr[t.Endpoint(i).Addr] = i
	}
	st.loads = svc.Loads(lb.src)
	return st, nil
}

// Balance picks an endpoint. key is hashed (HashKey) and used by the
// consistent_hash policy only. A service with spillover is balanced by its
// priority loads (Picker.PickLoads), others by the candidate range, widened
// under load for a load_aware service (Picker.Widen, by the counts of Inc
// and Done). It returns an error wrapping ErrNoCandidate when
// the tree has no candidate for the source (strict mode without a full match,
// or no eligible endpoint).
func (lb *LocalityBalancer) Balance(key string) (netip.AddrPort, error) {
	st := lb.state.Load()
	var k uint64
	if st.svc.policy == PolicyConsistentHash {
		k = HashKey(key)
	}
	var i uint32
	var ok bool
	if st.svc.overprovision != 0 {
		i, ok = st.picker.PickLoads(st.svc, &st.loads, k)
	} else {
		i, ok = st.picker.Pick(st.svc, st.picker.Widen(st.svc, st.r), k)
	}
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("%w: service %q (%s) from %v", ErrNoCandidate, st.svc.name, st.svc.mode, lb.src)
	}
	return st.svc.tree.Endpoint(i).Addr, nil
}

// Candidates returns the current candidate range and the service it is in
// (the lookup's, before load-aware widening: Balance widens it by the
// counts of Inc and Done while they are above the service's load band).
func (lb *LocalityBalancer) Candidates() (*Service, Range) {
	st := lb.state.Load()
	return st.svc, st.r
}

// Loads returns the priority loads of the current tree for the source.
func (lb *LocalityBalancer) Loads() Loads { return lb.state.Load().loads }

// Inc counts one more request in flight to addr; unknown addresses are ignored.
func (lb *LocalityBalancer) Inc(addr netip.AddrPort) {
	st := lb.state.Load()
	if i, ok := st.byAddr[addr]; ok {
		st.picker.Inc(i)
	}
}

// Done ends one request counted by Inc; counts never go below 0.
func (lb *LocalityBalancer) Done(addr netip.AddrPort) {
	st := lb.state.Load()
	if i, ok := st.byAddr[addr]; ok {
		st.picker.Done(i)
	}
}

// InFlight is the current count of addr (0 if unknown).
func (lb *LocalityBalancer) InFlight(addr netip.AddrPort) int64 {
	st := lb.state.Load()
	if i, ok := st.byAddr[addr]; ok {
		return st.picker.InFlight(i)
	}
	return 0
}

// Update switches to a new tree in one atomic step: a Balance sees the old
// tree or the new one, never a mix. In-flight counts of addresses present in
// both trees carry over (an Inc or Done racing with Update may be lost; counts
// never go below 0). If the new tree lacks the service, Update returns an error
// wrapping ErrUnknownService and the balancer keeps the old tree.
func (lb *LocalityBalancer) Update(t *Tree) error {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	st, err := lb.newState(t)
	if err != nil {
		return err
	}
	old := lb.state.Load()
	for addr, i := range st.byAddr {
		if j, ok := old.byAddr[addr]; ok {
			if n := old.picker.InFlight(j); n != 0 {
				st.picker.add(i, int32(n)) // the new picker counts nothing yet
			}
		}
	}
	lb.state.Store(st)
	return nil
}
