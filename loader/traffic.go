package loader

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"

	"github.com/loctree/loctree/loader/kernel"
	"github.com/loctree/loctree/shared"
)

// DefaultTrafficScope is the scope the traffic matrix reports by.
const DefaultTrafficScope = "zone"

// maxTrafficPairs bounds the (source, destination) series of the traffic
// matrix, whatever the scope (zone: a few dozen; node: many). Pairs take
// a series in the order they are first seen; later ones count under
// (other), as the filter's per-service counters do.
const maxTrafficPairs = 256

const (
	otherValue = "(other)"   // a pair past maxTrafficPairs, or a pick the kernel could not key
	noValue    = "(none)"    // a source without a value at the scope
	unknownDep = "(unknown)" // a pick whose service or endpoint the installed tree no longer has
)

// trafficKey identifies one of the kernel's counts.
type trafficKey struct {
	cgroup          uint64
	frontend, endpt netip.AddrPort
}

// trafficTally turns the kernel's cumulative counts per (source, service,
// backend) into counts per (source value, destination value) at the scope.
// It attributes each count's growth since the last read with the tree
// installed at that read (the agent reads at every scrape and before every
// install), so a pick counts where its endpoint was when it was made, and
// the series only grow.
type trafficTally struct {
	scope      string
	maxPairs   int // maxTrafficPairs; lower in tests
	last       map[trafficKey]kernel.TrafficTotals
	lastOther  kernel.TrafficTotals
	pairs      map[[2]string]kernel.TrafficTotals // the matrices; at most maxTrafficPairs, then otherValue
	depths     map[string]uint64                  // picks by match depth ("0".."8", or unknownDep)
	placed     uint64                             // picks with a source and a destination value
	cross      uint64                             // of those, to another value
	nolocality float64                            // of those, how many would have crossed with no locality
	tree       *shared.Tree
	index      map[netip.AddrPort]*trafficService // the tree's services by VIP
}

// trafficService is what the tally needs of one service of the tree.
type trafficService struct {
	svc   *shared.Service
	dests *shared.Destinations
	eps   map[netip.AddrPort]uint32 // endpoint index by address (the first, for a network rule's copies)
}

func newTrafficTally(scope string) *trafficTally {
	if scope == "" {
		scope = DefaultTrafficScope
	}
	return &trafficTally{scope: scope, maxPairs: maxTrafficPairs, last: map[trafficKey]kernel.TrafficTotals{}, pairs: map[[2]string]kernel.TrafficTotals{}, depths: map[string]uint64{}}
}

// update adds the growth of the kernel's counts since the last update.
// It returns the stale counts: those that did not grow since the last
// update and whose endpoint tree no longer has (the programs cannot pick
// it any more), which the caller may delete from the kernel and then
// forget.
func (t *trafficTally) update(tree *shared.Tree, counts []kernel.TrafficCount, other kernel.TrafficTotals) (stale []kernel.TrafficCount) {
	if tree != t.tree {
		t.tree, t.index = tree, nil
	}
	for _, c := range counts {
		k := trafficKey{c.Cgroup, c.Frontend, c.Backend}
		last, seen := t.last[k]
		if n, grew := growth(c.TrafficTotals, last); grew {
			t.add(c, n)
		} else if _, _, ok := t.endpoint(c.Frontend, c.Backend); seen && !ok {
			stale = append(stale, c)
		}
		t.last[k] = c.TrafficTotals
	}
	if n, grew := growth(other, t.lastOther); grew {
		t.pairs[[2]string{otherValue, otherValue}] = plus(t.pairs[[2]string{otherValue, otherValue}], n)
		if n.Picks > 0 {
			t.depths[unknownDep] += n.Picks
		}
		t.lastOther = other
	}
	return stale
}

// growth is how much each of now's counts grew since last, and whether
// one did. Kernel counts only grow; one that did not counts 0.
func growth(now, last kernel.TrafficTotals) (kernel.TrafficTotals, bool) {
	sub := func(a, b uint64) uint64 { return max(a, b) - b }
	n := kernel.TrafficTotals{Picks: sub(now.Picks, last.Picks), Sent: sub(now.Sent, last.Sent), Received: sub(now.Received, last.Received)}
	return n, n != kernel.TrafficTotals{}
}

func plus(a, b kernel.TrafficTotals) kernel.TrafficTotals {
	return kernel.TrafficTotals{Picks: a.Picks + b.Picks, Sent: a.Sent + b.Sent, Received: a.Received + b.Received}
}

// forget drops counts the kernel no longer holds: a key that comes back
// counts from zero.
func (t *trafficTally) forget(counts []kernel.TrafficCount) {
	for _, c := range counts {
		delete(t.last, trafficKey{c.Cgroup, c.Frontend, c.Backend})
	}
}

// add attributes the growth n of count c: its new picks, and its closed
// connections' bytes.
func (t *trafficTally) add(c kernel.TrafficCount, n kernel.TrafficTotals) {
	src, dst, depth := noValue, shared.UnknownValue, unknownDep
	if c.Source == nil {
		src = shared.UnknownValue
	} else if v := c.Source[t.scope]; v != "" {
		src = v
	}
	s, i, ok := t.endpoint(c.Frontend, c.Backend)
	if ok {
		dst = s.dests.Value(i)
		if c.Source != nil {
			depth = strconv.Itoa(s.svc.SharedScopes(c.Source, i))
		}
	}
	t.count(src, dst, n)
	if n.Picks == 0 {
		return // bytes only: the shares are of connections
	}
	t.depths[depth] += n.Picks
	if src == noValue || src == shared.UnknownValue || dst == shared.UnknownValue {
		return
	}
	t.placed += n.Picks
	if src != dst {
		t.cross += n.Picks
	}
	if p, ok := s.dests.NoLocalityCross(src); ok {
		t.nolocality += p * float64(n.Picks)
	}
}

// count adds n to the pair's series, or to (other) past the cap: a pair
// has a series in every matrix (connections, bytes sent, received) or in
// none.
func (t *trafficTally) count(src, dst string, n kernel.TrafficTotals) {
	pair := [2]string{src, dst}
	if _, ok := t.pairs[pair]; !ok && len(t.pairs) >= t.maxPairs {
		pair = [2]string{otherValue, otherValue}
	}
	t.pairs[pair] = plus(t.pairs[pair], n)
}

// endpoint finds the service at fe and its endpoint at b in the tree.
func (t *trafficTally) endpoint(fe, b netip.AddrPort) (*trafficService, uint32, bool) {
	if t.tree == nil {
		return nil, 0, false
	}
	if t.index == nil {
		t.index = map[netip.AddrPort]*trafficService{}
		for _, s := range t.tree.Services() {
			if s.VIP().IsValid() {
				t.index[s.VIP()] = &trafficService{svc: s}
			}
		}
	}
	s, ok := t.index[fe]
	if !ok {
		return nil, 0, false
	}
	if s.eps == nil {
		s.dests, s.eps = s.svc.Destinations(t.scope), map[netip.AddrPort]uint32{}
		for i := s.svc.FirstEndpoint(); i < s.svc.FirstEndpoint()+s.svc.EndpointCount(); i++ {
			s.eps[t.tree.Endpoint(i).Addr] = i
		}
	}
	i, ok := s.eps[b]
	return s, i, ok
}

// write writes the tally's metrics.
func (t *trafficTally) write(p *promWriter) {
	t.matrix(p, "loctree_traffic_connections_total", fmt.Sprintf("New connections (and UDP sockets' first datagram to a backend) the kernel redirected, by the source's value at the scope (its cgroup's locality or the node's) and the picked endpoint's; (none): a source without that scope, (unknown): a service that does not route by the scope, (other): past %d pairs or the kernel's --max-traffic keys.", maxTrafficPairs),
		func(n kernel.TrafficTotals) uint64 { return n.Picks })
	t.matrix(p, "loctree_traffic_sent_bytes_total", "Bytes the backends acknowledged on the redirected TCP connections, counted when a connection closes (an open one is not in it yet), by the same pairs as loctree_traffic_connections_total.",
		func(n kernel.TrafficTotals) uint64 { return n.Sent })
	t.matrix(p, "loctree_traffic_received_bytes_total", "Bytes received from the backends on the redirected TCP connections, counted when a connection closes, by the same pairs as loctree_traffic_connections_total.",
		func(n kernel.TrafficTotals) uint64 { return n.Received })
	const depth = "loctree_traffic_connections_by_depth_total"
	p.Head(depth, "counter", "The same connections by match depth: how many leading scopes of its service the picked endpoint shares with the source.")
	for _, d := range slices.Sorted(maps.Keys(t.depths)) {
		p.Printf("%s{depth=%q} %d\n", depth, d, t.depths[d])
	}
	p.Labeled("loctree_traffic_placed_connections_total", "counter", "Connections whose source and destination both have a value at the scope: the base of the cross shares.", "scope", []labeledValue{{Label: t.scope, V: float64(t.placed)}})
	p.Labeled("loctree_traffic_cross_connections_total", "counter", "Of the placed connections, those to another value at the scope (cross-zone by default).", "scope", []labeledValue{{Label: t.scope, V: float64(t.cross)}})
	p.Labeled("loctree_traffic_nolocality_cross_connections_total", "counter", "How many of the placed connections would have crossed with no locality: for each, the share of its service's eligible endpoints, weighed as its policy weighs them, outside the source's value.", "scope", []labeledValue{{Label: t.scope, V: t.nolocality}})
	p.Labeled("loctree_traffic_cross_ratio", "gauge", "cross / placed connections since the agent started (0 before any).", "scope", []labeledValue{{Label: t.scope, V: ratio(float64(t.cross), t.placed)}})
	p.Labeled("loctree_traffic_nolocality_cross_ratio", "gauge", "nolocality_cross / placed connections since the agent started: the share that would have crossed with no locality.", "scope", []labeledValue{{Label: t.scope, V: ratio(t.nolocality, t.placed)}})
}

// matrix writes one of the tally's matrices: the value of of every pair.
func (t *trafficTally) matrix(p *promWriter, name, help string, of func(kernel.TrafficTotals) uint64) {
	scope := "scope=" + strconv.Quote(t.scope)
	p.Head(name, "counter", help)
	for _, pair := range slices.SortedFunc(maps.Keys(t.pairs), comparePairs) {
		p.Printf("%s{%s,source=%q,destination=%q} %d\n", name, scope, pair[0], pair[1], of(t.pairs[pair]))
	}
}

func ratio(a float64, b uint64) float64 {
	if b == 0 {
		return 0
	}
	return a / float64(b)
}

func comparePairs(a, b [2]string) int {
	return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1]))
}
