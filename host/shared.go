package host

import (
	"slices"
	"sync"
)

// SharedData is the host-wide key-value store of proxy_get_shared_data and
// proxy_set_shared_data, shared by every VM of a host. Each key carries a
// compare-and-swap token that changes on every write; a write that names a
// non-zero token must name the current one.
type SharedData struct {
	mu   sync.Mutex
	m    map[string]sharedValue
	next uint32
}

type sharedValue struct {
	data []byte
	cas  uint32
}

func newSharedData() *SharedData { return &SharedData{m: map[string]sharedValue{}} }

// Get returns a copy of the value of key and its CAS token.
func (s *SharedData) Get(key string) ([]byte, uint32, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[key]
	return slices.Clone(v.data), v.cas, ok
}

// CAS returns the key's current CAS token without copying the value.
func (s *SharedData) CAS(key string) (uint32, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[key]
	return v.cas, ok
}

// Set stores value under key. A non-zero cas must equal the current token
// of an existing key, else it returns StatusCASMismatch; an absent key is
// created whatever cas says (cpp-host src/shared_data.cc:85-93).
func (s *SharedData) Set(key string, value []byte, cas uint32) Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.m[key]
	if ok && cas != 0 && cur.cas != cas {
		return StatusCASMismatch
	}
	s.next++
	if s.next == 0 {
		s.next = 1
	}
	s.m[key] = sharedValue{data: slices.Clone(value), cas: s.next}
	return StatusOK
}

// queues is the host-wide set of shared queues.
type queues struct {
	mu     sync.Mutex
	byName map[string]uint32
	q      map[uint32]*queue
	next   uint32
}

type queue struct {
	items [][]byte
	owner *VM
	ctxID uint32
}

func newQueues() *queues { return &queues{byName: map[string]uint32{}, q: map[uint32]*queue{}} }

func (qs *queues) register(name string, owner *VM, ctxID uint32) uint32 {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	if id, ok := qs.byName[name]; ok {
		qs.q[id].owner, qs.q[id].ctxID = owner, ctxID
		return id
	}
	qs.next++
	qs.byName[name] = qs.next
	qs.q[qs.next] = &queue{owner: owner, ctxID: ctxID}
	return qs.next
}

func (qs *queues) resolve(name string) (uint32, bool) {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	id, ok := qs.byName[name]
	return id, ok
}

func (qs *queues) enqueue(id uint32, v []byte) (*VM, uint32, Status) {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	q, ok := qs.q[id]
	if !ok {
		return nil, 0, StatusNotFound
	}
	q.items = append(q.items, slices.Clone(v))
	return q.owner, q.ctxID, StatusOK
}

func (qs *queues) dequeue(id uint32) ([]byte, Status) {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	q, ok := qs.q[id]
	if !ok {
		return nil, StatusNotFound
	}
	if len(q.items) == 0 {
		return nil, StatusEmpty
	}
	v := q.items[0]
	q.items = q.items[1:]
	return v, StatusOK
}
