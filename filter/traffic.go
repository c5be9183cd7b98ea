package main

import (
	"slices"

	"github.com/loctree/loctree/filter/internal/abi"
	"github.com/loctree/loctree/shared"
)

// Cross-zone traffic (docs/WASM.md, "Cross-zone traffic"): the requests
// this VM steered, by the proxy's value at the traffic scope (zone by
// default) and the picked endpoint's, with the share that would have
// crossed with no locality. A request costs an array increment and a
// float add; the names and the sums are made on the tick.
//
// With extraStatTags loctree_traffic_source and loctree_traffic_destination
// (istio/mesh/istiod-values.yaml), Prometheus sees
// loctree_traffic_requests_total{loctree_traffic_source, loctree_traffic_destination}.
const (
	defaultTrafficScope = "zone"
	// maxTrafficDestinations bounds the destination values besides the
	// proxy's own a VM gives their own counter (the source is the proxy's,
	// one per VM); later ones count under (other).
	maxTrafficDestinations = 64
	noValue                = "(none)" // the proxy has no value at the scope
	unknownDest            = 0        // id of shared.UnknownValue
	otherDest              = 1        // id of otherServices, "(other)"
)

// traffic are the VM's per-destination counts and its counters.
type traffic struct {
	scope      string         // the scope key
	src        string         // the proxy's value at the scope, or noValue
	srcTag     string         // src as the source tag: otherServices if the tag form cannot carry it
	srcID      int            // id of src as a destination
	ids        map[string]int // destination value → index in counts
	names      []string       // by index
	counts     []uint64       // requests since the last flush, by index
	metrics    []lazyCounter  // by index
	nolocality float64        // requests that would have crossed, not flushed yet (fraction kept)
	placed     abi.Counter
	cross      abi.Counter
	noloc      abi.Counter
}

func newTraffic(scope, src string) *traffic {
	if src == "" {
		src = noValue
	}
	t := &traffic{scope: scope, src: src, srcTag: src, ids: map[string]int{}}
	if !taggable(src) {
		t.srcTag = otherServices
	}
	t.id(shared.UnknownValue)
	t.id(otherServices)
	t.srcID = t.id(src)
	t.placed = abi.DefineCounterMetric("loctree_traffic_placed_requests_total")
	t.cross = abi.DefineCounterMetric("loctree_traffic_cross_requests_total")
	t.noloc = abi.DefineCounterMetric("loctree_traffic_nolocality_cross_requests_total")
	return t
}

// id is the index of destination value v (otherDest past the cap).
func (t *traffic) id(v string) int {
	if i, ok := t.ids[v]; ok {
		return i
	}
	reserved := 2 // (unknown) and (other), then the proxy's own value
	if t.srcID > otherDest {
		reserved++
	}
	if len(t.names) >= maxTrafficDestinations+reserved || !taggable(v) && len(t.names) >= 2 {
		return otherDest
	}
	i := len(t.names)
	t.ids[v], t.names, t.counts = i, append(t.names, v), append(t.counts, 0)
	t.metrics = append(t.metrics, lazyCounter{name: statTag("loctree_traffic_source", t.srcTag) +
		statTag("loctree_traffic_destination", v) + "loctree_traffic_requests_total"})
	return i
}

// flush adds the counts since the last flush to the host's counters.
func (t *traffic) flush() {
	var placed, cross uint64
	for i, n := range t.counts {
		if n == 0 {
			continue
		}
		t.metrics[i].add(n)
		t.counts[i] = 0
		if i == unknownDest || i == otherDest || t.src == noValue {
			continue
		}
		placed += n
		if t.names[i] != t.src {
			cross += n
		}
	}
	if placed > 0 {
		t.placed.Increment(placed)
	}
	if cross > 0 {
		t.cross.Increment(cross)
	}
	if whole := uint64(t.nolocality); whole > 0 {
		t.noloc.Increment(whole)
		t.nolocality -= float64(whole)
	}
}

// svcTraffic is what the counters need of one service, per tree: no
// table of its endpoints (a proxy's memory is the tree's).
type svcTraffic struct {
	ready bool
	level int     // the scope's index in the service's scopes; -1: not one
	same  bool    // a pick matching more than level scopes is in the proxy's own value
	cross float64 // the no-locality cross share for the proxy's value; -1: none
}

// countTraffic counts a request picked to endpoint ep of svc, whose
// source matched depth scopes. A pick that matched past the scope is in
// the proxy's own value (candidates share the source's path to their
// node); any other is found by a walk down the tree.
func (st *treeState) countTraffic(t *traffic, svc *shared.Service, ep uint32, depth int) {
	s := &st.traffic[svc.Index()]
	if !s.ready {
		s.prepare(t, svc)
	}
	var id int
	switch {
	case s.level < 0:
		id = unknownDest
	case s.same && depth > s.level:
		id = t.srcID
	default:
		id = t.id(svc.ValueAt(ep, s.level))
	}
	t.counts[id]++
	if id != unknownDest && s.cross >= 0 {
		t.nolocality += s.cross
	}
}

// prepare reads what svc's counters need (once per tree).
func (s *svcTraffic) prepare(t *traffic, svc *shared.Service) {
	scopes := svc.Scopes()
	s.ready, s.level, s.cross = true, slices.Index(scopes, t.scope), -1
	// With the network rule a match past the network may come from another
	// network's copies, whose depth counts the scopes after the network.
	s.same = t.src != noValue && scopes[0] != "network"
	if p, ok := svc.NoLocalityCross(s.level, t.src); ok && t.src != noValue {
		s.cross = p
	}
}
