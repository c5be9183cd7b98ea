package shared

import "github.com/loctree/loctree/shared/wire"

// Load-aware widening (docs/TOPOLOGY.md, "Load-aware widening"): a
// source's candidate node widens to its parent while the requests in flight
// to the node's eligible endpoints exceed High per endpoint, and narrows
// back only when they fall below Low per endpoint. The counts are the
// Picker's (Inc and Done), one add per level of the endpoint's path; the
// state, wide or not, is per tree node.

// parseLoadAware validates load_aware and fills its defaults: a band
// 1 <= low < high <= MaxLoadBand, on a failover service without spillover,
// network rule or locality_lb: false, whose candidate sets the tree holds
// as nested nodes.
func (s *builtService) parseLoadAware(spec *ServiceSpec) error {
	la := spec.LoadAware
	if la == nil {
		return nil
	}
	if why := s.loadAwareConflict(spec); why != "" {
		return invalid("service %q: load_aware %s", s.name, why)
	}
	s.loadHigh, s.loadLow = DefaultLoadHigh, DefaultLoadLow
	if la.High != nil {
		s.loadHigh = *la.High
	}
	if la.Low != nil {
		s.loadLow = *la.Low
	}
	if s.loadLow < 1 || s.loadLow >= s.loadHigh || s.loadHigh > MaxLoadBand {
		return invalid("service %q: load_aware band low %d, high %d: want 1 <= low < high <= %d (requests in flight per endpoint; the defaults are low %d, high %d)",
			s.name, s.loadLow, s.loadHigh, MaxLoadBand, DefaultLoadLow, DefaultLoadHigh)
	}
	return nil
}

// loadAwareConflict says why load_aware cannot apply to the service, or "".
func (s *builtService) loadAwareConflict(spec *ServiceSpec) string {
	switch {
	case s.mode == ModeStrict:
		return "cannot apply in mode strict (a strict service never leaves the source's locality); remove load_aware or use mode failover"
	case s.spill:
		return "is not implemented with spillover yet (widening would have to move Envoy's priority loads, which are computed from health alone); remove one of them"
	case spec.LocalityLB != nil && !*spec.LocalityLB:
		return "needs locality load balancing (with locality_lb: false every source already gets every endpoint); remove load_aware or locality_lb: false"
	case s.netRule:
		return "is not implemented with the network rule yet (its other-network candidates are not a parent node); set network_rule: plain or remove load_aware"
	}
	return ""
}

// checkLoadBand reads the load band of a service record: both zero, or
// 1 <= low < high.
func checkLoadBand(r []byte, s *Service) error {
	s.loadHigh, s.loadLow = uint32(le.Uint16(r[wire.SLoadHigh:])), uint32(le.Uint16(r[wire.SLoadLow:]))
	if s.loadHigh == 0 && s.loadLow == 0 {
		return nil
	}
	if s.loadLow < 1 || s.loadLow >= s.loadHigh {
		return corrupt("load band low %d, high %d", s.loadLow, s.loadHigh)
	}
	return nil
}

// checkLoadAware refuses a load band on a service that cannot widen (the
// builder's loadAwareConflict, as far as the records tell it).
func (s *Service) checkLoadAware() error {
	if s.loadHigh != 0 && (s.mode == ModeStrict || s.overprovision != 0 || s.networkRule || s.netOther) {
		return corrupt("load band on a strict, spillover or network-rule service")
	}
	return nil
}

// LoadAware is the service's load band in requests in flight per eligible
// endpoint; ok is false when the service does not widen under load.
func (s *Service) LoadAware() (high, low uint32, ok bool) {
	return s.loadHigh, s.loadLow, s.loadHigh != 0
}

// noNode marks an endpoint outside every load-aware service's tree, and
// the parent of a root.
const noNode = ^uint32(0)

// nodeLoads are a Picker's per-node in-flight counts and widening state,
// made when the tree has a load-aware service.
type nodeLoads struct {
	leaf   []uint32   // by absolute endpoint index: its deepest node, or noNode
	parent []uint32   // by absolute node index: its parent, or noNode
	count  []counter  // by absolute node index: in flight to its range
	wide   []wideFlag // by absolute node index: widened, until below the low edge
}

// newNodeLoads indexes the nodes of t's load-aware services; nil when
// there is none.
func newNodeLoads(t *Tree) *nodeLoads {
	var l *nodeLoads
	for i := range t.services {
		s := &t.services[i]
		if s.loadHigh == 0 {
			continue
		}
		if l == nil {
			l = &nodeLoads{leaf: make([]uint32, t.NumEndpoints()), parent: make([]uint32, t.NumNodes()),
				count: make([]counter, t.NumNodes()), wide: make([]wideFlag, t.NumNodes())}
			for k := range l.leaf {
				l.leaf[k] = noNode
			}
		}
		l.index(t, s)
	}
	return l
}

// index fills the parents of s's nodes and the deepest node of each of its
// eligible endpoints: nodes are breadth-first, so a deeper node comes later
// and overwrites its ancestors.
func (l *nodeLoads) index(t *Tree, s *Service) {
	l.parent[s.lay.Root] = noNode
	for n := s.lay.Root; n < s.lay.Root+s.lay.NodeCount; n++ {
		rec := t.nodes[int(n)*wire.NodeRecordSize:][:wire.NodeRecordSize]
		first, kids := le.Uint32(rec[wire.NFirstChild:]), le.Uint32(rec[wire.NChildCount:])
		for c := first; c < first+kids; c++ {
			l.parent[c] = n
		}
		for ep := le.Uint32(rec[wire.NLo:]); ep < le.Uint32(rec[wire.NHi:]); ep++ {
			l.leaf[ep] = n
		}
	}
}

// add counts d more in flight on every node of endpoint ep's path: at most
// MaxLevels+1 adds.
func (l *nodeLoads) add(ep uint32, d int32) {
	if int(ep) >= len(l.leaf) {
		return
	}
	for n := l.leaf[ep]; n != noNode; n = l.parent[n] {
		l.count[n].Add(d)
	}
}

// isWide updates and returns node n's state for its load: it turns wide
// above high per endpoint and narrow below low per endpoint; in between it
// keeps its state (hysteresis).
func (l *nodeLoads) isWide(n uint32, load, eligible int64, s *Service) bool {
	switch {
	case load > int64(s.loadHigh)*eligible:
		l.wide[n].Store(true)
		return true
	case load < int64(s.loadLow)*eligible:
		l.wide[n].Store(false)
		return false
	}
	return l.wide[n].Load()
}

// Widen is the candidate range of a load-aware service for a source whose
// lookup gave r, after load-aware widening by the in-flight counts Inc and
// Done keep (docs/TOPOLOGY.md, "Load-aware widening"); r itself for any
// other service, an empty r, or a range outside the service's tree. It
// does not allocate.
//
// From r's node, while the node is wide (in flight above high × its
// eligible endpoints, or wide already and not yet below low × them), the
// candidates are its parent's, never above the service's failover_limit.
func (p *Picker) Widen(s *Service, r Range) Range {
	l := p.loads
	if l == nil || s.loadHigh == 0 || s.tree != p.tree || r.Lo >= r.Hi {
		return r
	}
	n, depth := r.Node, r.Depth
	for depth > s.minRank && n < uint32(len(l.parent)) && l.parent[n] != noNode {
		rec := p.tree.nodes[int(n)*wire.NodeRecordSize:][:wire.NodeRecordSize]
		eligible := int64(le.Uint32(rec[wire.NHi:]) - le.Uint32(rec[wire.NLo:]))
		if !l.isWide(n, int64(l.count[n].Load()), eligible, s) {
			break
		}
		n, depth = l.parent[n], depth-1
	}
	if n == r.Node {
		return r
	}
	rec := p.tree.nodes[int(n)*wire.NodeRecordSize:][:wire.NodeRecordSize]
	return Range{Lo: le.Uint32(rec[wire.NLo:]), Hi: le.Uint32(rec[wire.NHi:]), Depth: depth, Node: n}
}
