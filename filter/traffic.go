package main

import (
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
	// maxTrafficDestinations bounds the destination values a VM gives
	// their own counter (the source is the proxy's, one per VM); later
	// ones count under (other).
	maxTrafficDestinations = 64
	noValue                = "(none)" // the proxy has no value at the scope
	unknownDest            = 0        // id of shared.UnknownValue
	otherDest              = 1        // id of otherServices, "(other)"
)

// traffic are the VM's per-destination counts and its counters.
type traffic struct {
	scope      string         // the scope key
	src        string         // the proxy's value at the scope, or noValue
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
	t := &traffic{scope: scope, src: src, ids: map[string]int{}}
	t.id(shared.UnknownValue)
	t.id(otherServices)
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
	if len(t.names) >= maxTrafficDestinations+2 || !taggable(v) && len(t.names) >= 2 {
		return otherDest
	}
	i := len(t.names)
	t.ids[v], t.names, t.counts = i, append(t.names, v), append(t.counts, 0)
	t.metrics = append(t.metrics, lazyCounter{name: statTag("loctree_traffic_source", t.src) +
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

// svcTraffic is one service's destinations for this VM, per tree.
type svcTraffic struct {
	ready bool
	first uint32
	ids   []int32 // destination id per endpoint from first
	cross float64 // the no-locality cross share for the proxy's value; -1: none
}

// countTraffic counts a request picked to endpoint ep of svc.
func (st *treeState) countTraffic(t *traffic, svc *shared.Service, ep uint32) {
	s := &st.traffic[svc.Index()]
	if !s.ready {
		s.prepare(t, svc)
	}
	id := int32(unknownDest)
	if ep-s.first < uint32(len(s.ids)) {
		id = s.ids[ep-s.first]
	}
	t.counts[id]++
	if id != unknownDest && s.cross >= 0 {
		t.nolocality += s.cross
	}
}

// prepare indexes svc's endpoints by destination id (once per tree).
func (s *svcTraffic) prepare(t *traffic, svc *shared.Service) {
	d := svc.Destinations(t.scope)
	s.ready, s.first, s.ids, s.cross = true, svc.FirstEndpoint(), make([]int32, d.Len()), -1
	for i := range s.ids {
		s.ids[i] = int32(t.id(d.Value(s.first + uint32(i))))
	}
	if p, ok := d.NoLocalityCross(t.src); ok && t.src != noValue {
		s.cross = p
	}
}
