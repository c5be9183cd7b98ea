package shared

import (
	"fmt"
	"slices"

	"github.com/loctree/loctree/shared/wire"
)

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// Decode validates an encoded tree and returns a view over it without copying
// records. Every invariant of docs/FORMAT.md that a lookup relies on is checked,
// so lookups on the result never read out of range. A truncated, oversized or
// corrupt blob gives an error wrapping ErrCorrupt; Decode never panics.
func Decode(b []byte) (*Tree, error) {
	if err := checkHeader(b); err != nil {
		return nil, err
	}
	nSvc := int(le.Uint32(b[wire.HServiceCount:]))
	t := &Tree{
		blob:     b,
		services: make([]Service, nSvc),
		byName:   make(map[string]int, nSvc),
		nodes:    b[le.Uint32(b[wire.HNodesOff:]):le.Uint32(b[wire.HEndpointsOff:])],
	}
	c := headerSections(b)
	_, epsOff, polsOff, auxOff, strOff, _ := c.offsets()
	t.eps, t.pols, t.aux = b[epsOff:polsOff], b[polsOff:auxOff], b[auxOff:strOff]
	strs := b[strOff:]
	var nodeNext, epNext, auxNext uint32
	for i := range t.services {
		s := &t.services[i]
		if err := t.decodeService(i, s, strs, nodeNext, epNext, auxNext); err != nil {
			return nil, fmt.Errorf("service %d: %w", i, err)
		}
		if i > 0 && t.services[i-1].name >= s.name {
			return nil, corrupt("service %d: %q is not sorted after %q", i, s.name, t.services[i-1].name)
		}
		if err := t.index(s); err != nil {
			return nil, err
		}
		nodeNext += s.lay.NodeCount
		epNext += s.lay.EpTotal + s.netCopies()
		auxNext += s.lay.AuxCount[0] + s.lay.AuxCount[1] + s.lay.NetCount
	}
	if int(nodeNext) != t.NumNodes() || int(epNext) != t.NumEndpoints() || int(auxNext) != len(t.aux)/wire.NodeRecordSize {
		return nil, corrupt("services cover %d nodes, %d endpoints and %d aux nodes of %d, %d and %d", nodeNext, epNext, auxNext, t.NumNodes(), t.NumEndpoints(), len(t.aux)/wire.NodeRecordSize)
	}
	return t, nil
}

func checkHeader(b []byte) error {
	if len(b) < wire.HeaderSize {
		return corrupt("%d bytes, shorter than the %d-byte header", len(b), wire.HeaderSize)
	}
	if string(b[wire.HMagic:wire.HMagic+MagicSize]) != magic {
		return corrupt("bad magic %q (want %q)", b[:4], magic)
	}
	if v := le.Uint16(b[wire.HVersion:]); v != FormatVersion {
		return corrupt("format version %d (this build reads %d)", v, FormatVersion)
	}
	if h := le.Uint16(b[wire.HHeaderSize:]); h != wire.HeaderSize {
		return corrupt("header size %d (want %d)", h, wire.HeaderSize)
	}
	if total := le.Uint32(b[wire.HTotalSize:]); uint64(total) != uint64(len(b)) || len(b) > MaxBlobSize {
		return corrupt("header says %d bytes, blob has %d", total, len(b))
	}
	if got, want := checksum(b), le.Uint32(b[wire.HChecksum:]); got != want {
		return corrupt("checksum %#08x, header says %#08x", got, want)
	}
	if f := le.Uint32(b[wire.HFlags:]); f != 0 {
		return corrupt("reserved header fields are not zero")
	}
	return checkSections(b)
}

// headerSections reads the section counts of a header whose counts are
// within the limits (checkSections).
func headerSections(b []byte) sections {
	return sections{
		svcs: int(le.Uint32(b[wire.HServiceCount:])), nodes: int(le.Uint32(b[wire.HNodeCount:])),
		eps: int(le.Uint32(b[wire.HEndpointCnt:])), aux: int(le.Uint32(b[wire.HAuxNodeCount:])),
		strs: int(le.Uint32(b[wire.HStringsSize:])),
	}
}

func checkSections(b []byte) error {
	nSvc := uint64(le.Uint32(b[wire.HServiceCount:]))
	nNodes := uint64(le.Uint32(b[wire.HNodeCount:]))
	nEps := uint64(le.Uint32(b[wire.HEndpointCnt:]))
	nAux := uint64(le.Uint32(b[wire.HAuxNodeCount:]))
	if nSvc > MaxServices || nNodes > MaxNodes || nEps > MaxEndpoints || nAux > MaxNodes {
		return corrupt("%d services, %d nodes, %d endpoints, %d aux nodes exceed the limits", nSvc, nNodes, nEps, nAux)
	}
	nodesOff := wire.HeaderSize + wire.ServiceRecordSize*nSvc
	epsOff := nodesOff + wire.NodeRecordSize*nNodes
	strOff := epsOff + wire.EndpointRecordSize*nEps + wire.PolicyRecordSize*nSvc + wire.NodeRecordSize*nAux
	want := [...]uint64{wire.HeaderSize, nodesOff, epsOff, strOff, strOff + uint64(le.Uint32(b[wire.HStringsSize:]))}
	got := [...]uint64{
		uint64(le.Uint32(b[wire.HServicesOff:])), uint64(le.Uint32(b[wire.HNodesOff:])),
		uint64(le.Uint32(b[wire.HEndpointsOff:])), uint64(le.Uint32(b[wire.HStringsOff:])), uint64(len(b)),
	}
	if want != got {
		return corrupt("section offsets %v do not match the counts (want %v)", got, want)
	}
	return nil
}

func (t *Tree) decodeService(i int, s *Service, strs []byte, nodeFirst, epFirst, auxFirst uint32) error {
	r := t.serviceRecord(i)
	*s = Service{
		index: i, tree: t, lay: wire.ServiceLayout(t.blob, i),
		mode: Mode(r[wire.SMode]), policy: Policy(r[wire.SPolicy]), health: Health(r[wire.SHealth]),
	}
	if err := checkServiceRecord(r, s, nodeFirst, epFirst, t); err != nil {
		return err
	}
	if err := t.decodePolicy(i, s, auxFirst); err != nil {
		return err
	}
	if err := s.decodeMeta(r, strs); err != nil {
		return err
	}
	if err := s.indexFailover(); err != nil {
		return err
	}
	if err := s.indexDistribute(); err != nil {
		return err
	}
	if err := s.checkNetworkRule(); err != nil {
		return err
	}
	if err := s.checkLoadAware(); err != nil {
		return err
	}
	if err := t.checkEndpoints(s); err != nil {
		return err
	}
	if err := t.checkNodes(s); err != nil {
		return err
	}
	if err := t.checkAuxTrees(s); err != nil {
		return err
	}
	s.kids = [2]kids{newKids(t.nodes, s.lay.Root, s.lay.NodeCount), newKids(t.aux, s.lay.AuxRoot[0], s.lay.AuxCount[0]+s.lay.AuxCount[1]+s.lay.NetCount)}
	s.slots = newScopeSlots(s.scopes)
	s.precomputeDistribute()
	s.precomputeLocalities()
	return nil
}

// decodePolicy reads and checks service i's policy record.
func (t *Tree) decodePolicy(i int, s *Service, auxFirst uint32) error {
	p := t.pols[i*wire.PolicyRecordSize:][:wire.PolicyRecordSize]
	s.overprovision = uint32(le.Uint16(p[wire.POverprovision:]))
	s.panicThreshold = uint32(p[wire.PPanic])
	s.failover = make([]FailoverSpec, p[wire.PFailoverCount])
	s.distribute = make([]DistributeSpec, p[wire.PDistributeCount])
	s.minRank = int(p[wire.PMinRank])
	if err := s.decodeNetworkRule(t, p, uint64(len(t.aux)/wire.NodeRecordSize)); err != nil {
		return err
	}
	nAux := uint64(len(t.aux) / wire.NodeRecordSize)
	switch {
	case p[wire.PReserved] != 0:
		return corrupt("reserved policy bytes are not zero")
	case s.lay.AuxRoot[0] != auxFirst || s.lay.AuxCount[0] == 0 || s.lay.AuxRoot[1] != s.lay.AuxRoot[0]+s.lay.AuxCount[0] || s.lay.AuxCount[1] == 0 ||
		uint64(s.lay.AuxRoot[1])+uint64(s.lay.AuxCount[1]) > nAux:
		return corrupt("aux trees at %d (+%d) and %d (+%d) do not follow the previous service's (at %d) inside %d aux nodes", s.lay.AuxRoot[0], s.lay.AuxCount[0], s.lay.AuxRoot[1], s.lay.AuxCount[1], auxFirst, nAux)
	case uint64(s.lay.EpEligible)+uint64(s.lay.EpDegraded) > uint64(s.lay.EpTotal), s.lay.EpDegraded > 0 && s.health == HealthAllowAll:
		return corrupt("%d degraded endpoints after %d eligible of %d (health %s)", s.lay.EpDegraded, s.lay.EpEligible, s.lay.EpTotal, s.health)
	case s.panicThreshold > 100, s.overprovision == 0 && (s.panicThreshold != 0 || len(s.failover) != 0 || len(s.distribute) != 0):
		return corrupt("panic threshold %d with overprovisioning factor %d", s.panicThreshold, s.overprovision)
	case s.overprovision != 0 && s.mode != ModeFailover:
		return corrupt("priority load in mode %s", s.mode)
	case s.minRank > int(t.serviceRecord(i)[wire.SLevels]), s.minRank > 0 && (s.mode != ModeFailover || len(s.distribute) != 0):
		return corrupt("min_rank %d with %d levels in mode %s", s.minRank, t.serviceRecord(i)[wire.SLevels], s.mode)
	}
	return nil
}

// checkAuxTrees checks the trees over the degraded and the unhealthy
// endpoints as checkNodes does the main tree (their values are not stored,
// so their labels are not checked against values).
func (t *Tree) checkAuxTrees(s *Service) error {
	lo := s.lay.EpFirst + s.lay.EpEligible
	bounds := [3]uint32{lo, lo + s.lay.EpDegraded, s.lay.EpFirst + s.lay.EpTotal}
	for k := range s.lay.AuxRoot {
		v := treeView{nodes: t.aux, root: s.lay.AuxRoot[k], count: s.lay.AuxCount[k], lo: bounds[k], hi: bounds[k+1], levels: len(s.scopes)}
		if err := v.check(); err != nil {
			return fmt.Errorf("%s tree: %w", [2]string{"degraded", "unhealthy"}[k], err)
		}
	}
	lo = s.lay.EpFirst + s.lay.EpTotal
	if s.netOther {
		v := treeView{nodes: t.aux, root: s.lay.NetRoot, count: s.lay.NetCount, lo: lo, hi: lo + s.otherCopies, levels: len(s.scopes) + 1}
		if err := v.check(); err != nil {
			return fmt.Errorf("other-network tree: %w", err)
		}
		return t.checkOtherCopies(s)
	}
	if !s.networkRule {
		return nil
	}
	v := treeView{nodes: t.aux, root: s.lay.NetRoot, count: s.lay.NetCount, lo: lo, hi: lo + s.lay.EpEligible, levels: len(s.scopes) - 1}
	if err := v.check(); err != nil {
		return fmt.Errorf("network tree: %w", err)
	}
	return nil
}

func checkServiceRecord(r []byte, s *Service, nodeFirst, epFirst uint32, t *Tree) error {
	levels := int(r[wire.SLevels])
	switch {
	case levels < 1 || levels > MaxLevels:
		return corrupt("%d levels", levels)
	case s.mode > ModeStrict || s.policy > PolicyConsistentHash || s.health > HealthAllowAll:
		return corrupt("mode %d, policy %d, health %d", s.mode, s.policy, s.health)
	case s.lay.Root != nodeFirst || s.lay.NodeCount == 0 || uint64(s.lay.Root)+uint64(s.lay.NodeCount) > uint64(t.NumNodes()):
		return corrupt("nodes [%d, +%d) do not follow the previous service's (at %d) inside %d nodes", s.lay.Root, s.lay.NodeCount, nodeFirst, t.NumNodes())
	case s.lay.EpFirst != epFirst || s.lay.EpEligible > s.lay.EpTotal || uint64(s.lay.EpFirst)+uint64(s.lay.EpTotal) > uint64(t.NumEndpoints()):
		return corrupt("endpoints [%d, +%d) do not follow the previous service's (at %d) inside %d endpoints", s.lay.EpFirst, s.lay.EpTotal, epFirst, t.NumEndpoints())
	case r[wire.SVIPFamily] != 0 && r[wire.SVIPFamily] != 4 && r[wire.SVIPFamily] != 6:
		return corrupt("vip family %d", r[wire.SVIPFamily])
	case r[wire.SPad] != 0 || !allZero(r[wire.SReserved:]):
		return corrupt("reserved service bytes are not zero")
	}
	if err := checkAffinity(r, s); err != nil {
		return err
	}
	if err := checkLoadBand(r, s); err != nil {
		return err
	}
	if r[wire.SVIPFamily] != 0 {
		s.vip = getAddr(r[wire.SVIPAddr:], r[wire.SVIPPort:], r[wire.SVIPFamily])
		if s.vip.Port() == 0 || (r[wire.SVIPFamily] == 4 && !allZero(r[wire.SVIPAddr+4:wire.SVIPPort])) {
			return corrupt("bad vip")
		}
	} else if !allZero(r[wire.SVIPAddr:wire.SPad]) {
		return corrupt("vip bytes without a vip family")
	}
	s.scopes = make([]string, levels)
	return nil
}

// checkAffinity reads the session affinity timeout: only a consistent_hash
// service has one, and never more than a day.
func checkAffinity(r []byte, s *Service) error {
	s.affinityTimeout = le.Uint32(r[wire.SAffinity:])
	switch {
	case s.affinityTimeout > MaxAffinityTimeout:
		return corrupt("affinity timeout %d (at most %d)", s.affinityTimeout, MaxAffinityTimeout)
	case s.affinityTimeout != 0 && s.policy != PolicyConsistentHash:
		return corrupt("affinity timeout %d with policy %s", s.affinityTimeout, s.policy)
	}
	return nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// metaReader reads the length-prefixed strings of a service's metadata.
type metaReader struct {
	b   []byte
	err error
}

func (m *metaReader) str() string {
	if m.err != nil {
		return ""
	}
	if len(m.b) < 2 || len(m.b) < 2+int(le.Uint16(m.b)) {
		m.err = corrupt("metadata string runs past its end")
		return ""
	}
	n := int(le.Uint16(m.b))
	s := string(m.b[2 : 2+n])
	m.b = m.b[2+n:]
	return s
}

func (s *Service) decodeMeta(r, strs []byte) error {
	off, n := uint64(le.Uint32(r[wire.SMetaOff:])), uint64(le.Uint32(r[wire.SMetaLen:]))
	if off+n > uint64(len(strs)) {
		return corrupt("metadata [%d, +%d) outside the %d-byte strings section", off, n, len(strs))
	}
	m := metaReader{b: strs[off : off+n]}
	s.name = m.str()
	if m.err == nil && len(m.b) < 1 {
		return corrupt("metadata ends before the host count")
	}
	if m.err == nil {
		nHosts := int(m.b[0])
		m.b = m.b[1:]
		s.hosts = make([]string, nHosts)
		for i := range s.hosts {
			s.hosts[i] = m.str()
		}
	}
	for i := range s.scopes {
		s.scopes[i] = m.str()
	}
	s.values = make([]string, s.lay.NodeCount-1)
	for i := range s.values {
		s.values[i] = m.str()
	}
	for i := range s.failover {
		s.failover[i] = FailoverSpec{From: m.str(), To: m.str()}
	}
	m.readDistribute(s.distribute)
	if m.err == nil && len(m.b) != 0 {
		return corrupt("%d bytes of metadata left over", len(m.b))
	}
	if m.err == nil && s.name == "" {
		return corrupt("empty service name")
	}
	return m.err
}

// indexFailover checks the failover rules as Build does and hashes them.
func (s *Service) indexFailover() error {
	s.regionAt = slices.Index(s.scopes, "region")
	if len(s.failover) > 0 && s.regionAt < 0 {
		return corrupt("failover rules without a region scope")
	}
	s.failTo = make([][2]uint64, len(s.failover))
	for i, r := range s.failover {
		if r.From == "" || r.To == "" || r.From == r.To || slices.ContainsFunc(s.failover[:i], func(o FailoverSpec) bool { return o.From == r.From }) {
			return corrupt("failover rule %d from %q to %q", i, r.From, r.To)
		}
		s.failTo[i] = [2]uint64{Label(r.From), Label(r.To)}
	}
	return nil
}

func (t *Tree) index(s *Service) error {
	for _, n := range append([]string{s.name}, s.hosts...) {
		if _, dup := t.byName[n]; dup {
			return corrupt("name or host %q appears twice", n)
		}
		t.byName[n] = s.index
	}
	return nil
}

func (t *Tree) checkEndpoints(s *Service) error {
	if uint64(s.lay.EpFirst)+uint64(s.lay.EpTotal)+uint64(s.netCopies()) > uint64(t.NumEndpoints()) {
		return corrupt("the network rule's %d endpoint copies run past the %d endpoints", s.netCopies(), t.NumEndpoints())
	}
	var cum uint64
	for k := uint32(0); k < s.lay.EpTotal+s.netCopies(); k++ {
		b := t.eps[int(s.lay.EpFirst+k)*wire.EndpointRecordSize:][:wire.EndpointRecordSize]
		fam, flags := b[wire.EFamily], b[wire.EFlags]
		switch {
		case fam != 4 && fam != 6, fam == 4 && !allZero(b[wire.EAddr+4:wire.EPort]):
			return corrupt("endpoint %d: bad address family %d", s.lay.EpFirst+k, fam)
		case b[wire.EPort] == 0 && b[wire.EPort+1] == 0:
			return corrupt("endpoint %d: port 0", s.lay.EpFirst+k)
		case flags&^wire.FlagHealthy != 0:
			return corrupt("endpoint %d: unknown flags %#x", s.lay.EpFirst+k, flags)
		case k >= s.lay.EpTotal && s.netOther: // copies of every set: checkOtherCopies
		case (k < s.lay.EpEligible || k >= s.lay.EpTotal) != (flags&wire.FlagHealthy != 0 || s.health == HealthAllowAll):
			return corrupt("endpoint %d: health does not match its place", s.lay.EpFirst+k)
		}
		cum += uint64(le.Uint32(b[wire.EWeight:]))
		if le.Uint64(b[wire.ECumWeight:]) != cum {
			return corrupt("endpoint %d: cumulative weight %d, want %d", s.lay.EpFirst+k, le.Uint64(b[wire.ECumWeight:]), cum)
		}
	}
	if s.netOther {
		return nil // checkAuxTrees, once the copies' tree is checked
	}
	return t.checkNetworkCopies(s)
}

// checkNodes checks that the service's nodes form a breadth-first tree whose
// children are sorted by label and partition their parent's range, with every
// leaf at full depth, and that every label is the hash of its value.
func (t *Tree) checkNodes(s *Service) error {
	v := treeView{nodes: t.nodes, root: s.lay.Root, count: s.lay.NodeCount, lo: s.lay.EpFirst, hi: s.lay.EpFirst + s.lay.EpEligible, levels: len(s.scopes), values: s.values}
	return v.check()
}

// treeView is one tree of a service to check: its nodes [root, root+count)
// of a node section, covering the endpoints [lo, hi).
type treeView struct {
	nodes       []byte
	root, count uint32
	lo, hi      uint32
	levels      int
	values      []string // node values from root+1, or nil (not stored)
}

func (v *treeView) node(i uint32) Node { return nodeAt(v.nodes, i) }

func (v *treeView) check() error {
	end := v.root + v.count
	root := v.node(v.root)
	if root.Label != 0 || root.Lo != v.lo || root.Hi != v.hi {
		return corrupt("root node %d: label %#x, range [%d, %d), want 0 and [%d, %d)", v.root, root.Label, root.Lo, root.Hi, v.lo, v.hi)
	}
	depth, levelEnd, next := 0, v.root+1, v.root+1
	for i := v.root; i < end; i++ {
		if i == levelEnd {
			depth, levelEnd = depth+1, next
		}
		if i >= next && i != v.root {
			return corrupt("node %d is nobody's child", i)
		}
		n := v.node(i)
		if v.values != nil && i != v.root && Label(v.values[i-v.root-1]) != n.Label {
			return corrupt("node %d: label %#x is not the hash of %q", i, n.Label, v.values[i-v.root-1])
		}
		if err := v.checkChildren(i, n, depth, &next, end); err != nil {
			return err
		}
	}
	if next != end {
		return corrupt("nodes [%d, %d) are nobody's children", next, end)
	}
	return nil
}

func (v *treeView) checkChildren(i uint32, n Node, depth int, next *uint32, end uint32) error {
	if n.ChildCount == 0 {
		if n.FirstChild != 0 || (depth != v.levels && !(i == v.root && n.Lo == n.Hi)) {
			return corrupt("node %d: leaf at depth %d of %d", i, depth, v.levels)
		}
		return nil
	}
	if depth >= v.levels || n.FirstChild != *next || uint64(n.FirstChild)+uint64(n.ChildCount) > uint64(end) {
		return corrupt("node %d: children [%d, +%d) at depth %d are not the next nodes (%d) of the service", i, n.FirstChild, n.ChildCount, depth, *next)
	}
	lo, prev := n.Lo, uint64(0)
	for k := uint32(0); k < n.ChildCount; k++ {
		c := v.node(n.FirstChild + k)
		if c.Lo != lo || c.Hi <= c.Lo || (k > 0 && c.Label <= prev) {
			return corrupt("node %d: child %d breaks the label order or the range partition", i, n.FirstChild+k)
		}
		lo, prev = c.Hi, c.Label
	}
	if lo != n.Hi {
		return corrupt("node %d: children cover [%d, %d) of [%d, %d)", i, n.Lo, lo, n.Lo, n.Hi)
	}
	*next += n.ChildCount
	return nil
}
