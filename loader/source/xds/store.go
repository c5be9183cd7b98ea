package xds

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/loctree/loctree/shared"
)

// store holds the WDS resources the client accepted, decoded, and what
// changed since the source last took it. The client writes it; the
// source's Run loop reads it.
type store struct {
	mu        sync.Mutex
	workloads map[string]*workload       // by uid, its resource name
	services  map[string]*service        // by namespace/hostname, its resource name
	members   map[string]map[string]bool // service key → uids of the workloads naming it
	names     map[string]map[string]bool // service short name → service keys
	dirty     map[string]bool            // service keys to map again
	nodes     map[string]bool            // nodes whose workloads changed (the agent's locality may follow)
	own       shared.Locality            // the agent's locality as last computed (localityOf)
	since     time.Time                  // the arrival of the first change not taken
	complete  bool                       // the first response was applied
	kick      chan struct{}
}

func newStore() *store {
	return &store{
		workloads: map[string]*workload{}, services: map[string]*service{},
		members: map[string]map[string]bool{}, names: map[string]map[string]bool{},
		dirty: map[string]bool{}, nodes: map[string]bool{}, kick: make(chan struct{}, 1),
	}
}

// rejected is a resource the client NACKs, and why.
type rejected struct{ name, reason string }

func (r rejected) String() string { return r.name + ": " + r.reason }

// apply applies one delta response: every resource that decodes replaces
// the one of its name, every removed name is removed, and the resources
// that do not decode are returned (the client NACKs them; the rest stays
// applied, as ztunnel's handlers do, src/xds.rs handle_single_resource).
func (st *store) apply(resp *discoveryv3.DeltaDiscoveryResponse) []rejected {
	st.mu.Lock()
	defer st.mu.Unlock()
	var bad []rejected
	for _, r := range resp.GetResources() {
		w, s, err := decode(r.GetResource())
		if err == nil && w != nil && w.uid != r.GetName() {
			err = fmt.Errorf("workload uid %q differs from its resource name", w.uid)
		}
		if err == nil && s != nil && s.key != r.GetName() {
			err = fmt.Errorf("service %q differs from its resource name", s.key)
		}
		if err != nil {
			bad = append(bad, rejected{r.GetName(), err.Error()})
			continue
		}
		st.remove(r.GetName())
		st.put(w, s)
	}
	for _, name := range resp.GetRemovedResources() {
		st.remove(name)
	}
	st.complete = true
	st.kickLocked()
	return bad
}

func (st *store) put(w *workload, s *service) {
	if w != nil {
		st.workloads[w.uid] = w
		st.nodes[w.node] = true
		for key := range w.services {
			set(st.members, key)[w.uid] = true
			st.dirty[key] = true
		}
		return
	}
	st.services[s.key] = s
	set(st.names, s.name)[s.key] = true
	st.markName(s.name)
}

// remove forgets the resource of that name, marking what depended on it.
func (st *store) remove(name string) {
	if w, ok := st.workloads[name]; ok {
		delete(st.workloads, name)
		st.nodes[w.node] = true
		for key := range w.services {
			delete(st.members[key], w.uid)
			st.dirty[key] = true
		}
	}
	if s, ok := st.services[name]; ok {
		delete(st.services, name)
		delete(st.names[s.name], s.key)
		st.markName(s.name)
		st.dirty[s.key] = true
	}
}

// markName marks every service of that short name: their bare host names
// depend on each other (mapInput.nameShared).
func (st *store) markName(name string) {
	for key := range st.names[name] {
		st.dirty[key] = true
	}
}

func set(m map[string]map[string]bool, key string) map[string]bool {
	if m[key] == nil {
		m[key] = map[string]bool{}
	}
	return m[key]
}

func (st *store) kickLocked() {
	if st.since.IsZero() {
		st.since = time.Now()
	}
	select {
	case st.kick <- struct{}{}:
	default:
	}
}

// snapshot is what Run maps: the dirty services' inputs and the agent's
// locality, taken under the lock.
type snapshot struct {
	inputs   map[string]*mapInput // dirty key → input, nil when the service is gone or unmanaged
	locality shared.Locality
	since    time.Time
	complete bool
}

// take returns the dirty services' inputs and clears the dirty set.
func (st *store) take(nodeName string) snapshot {
	st.mu.Lock()
	defer st.mu.Unlock()
	snap := snapshot{inputs: map[string]*mapInput{}, since: st.since, complete: st.complete}
	if st.nodes[nodeName] {
		st.own = st.localityOf(nodeName)
	}
	snap.locality = st.own
	network := snap.locality["network"]
	for key := range st.dirty {
		snap.inputs[key] = st.input(key, network)
	}
	st.dirty, st.nodes, st.since = map[string]bool{}, map[string]bool{}, time.Time{}
	return snap
}

// all marks every service dirty (a changed own network changes VIP and
// reachability choices).
func (st *store) all() {
	st.mu.Lock()
	defer st.mu.Unlock()
	for key := range st.services {
		st.dirty[key] = true
	}
	st.kickLocked()
}

func (st *store) input(key, network string) *mapInput {
	s := st.services[key]
	if s == nil || !s.managed() {
		return nil
	}
	in := &mapInput{svc: s, network: network, nameShared: len(st.names[s.name]) > 1}
	for _, uid := range slices.Sorted(maps.Keys(st.members[key])) {
		in.workloads = append(in.workloads, st.workloads[uid])
	}
	return in
}

// localityOf is the locality of the agent's node: that of the workload on
// it with the smallest uid (every workload of a node shares its region,
// zone and subzone; istiod takes them from the Node), nil while no
// workload is known on it.
func (st *store) localityOf(nodeName string) shared.Locality {
	var own *workload
	for _, w := range st.workloads {
		if w.node == nodeName && (own == nil || strings.Compare(w.uid, own.uid) < 0) {
			own = w
		}
	}
	if own == nil {
		return nil
	}
	return own.localityOf()
}

// counts are the numbers of workloads and services held.
func (st *store) counts() (workloads, services int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.workloads), len(st.services)
}
