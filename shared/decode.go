package shared

import (
	"fmt"
	"slices"
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
	nSvc := int(le.Uint32(b[hServiceCount:]))
	t := &Tree{
		blob:     b,
		services: make([]Service, nSvc),
		byName:   make(map[string]int, nSvc),
		nodes:    b[le.Uint32(b[hNodesOff:]):le.Uint32(b[hEndpointsOff:])],
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
		if i > 0 && t.services[i-1].Name >= s.Name {
			return nil, corrupt("service %d: %q is not sorted after %q", i, s.Name, t.services[i-1].Name)
		}
		if err := t.index(s); err != nil {
			return nil, err
		}
		nodeNext += s.NodeCount
		epNext += s.EpTotal + s.netCopies()
		auxNext += s.AuxCount[0] + s.AuxCount[1] + s.NetCount
	}
	if int(nodeNext) != t.NumNodes() || int(epNext) != t.NumEndpoints() || int(auxNext) != len(t.aux)/NodeRecordSize {
		return nil, corrupt("services cover %d nodes, %d endpoints and %d aux nodes of %d, %d and %d", nodeNext, epNext, auxNext, t.NumNodes(), t.NumEndpoints(), len(t.aux)/NodeRecordSize)
	}
	return t, nil
}

func checkHeader(b []byte) error {
	if len(b) < HeaderSize {
		return corrupt("%d bytes, shorter than the %d-byte header", len(b), HeaderSize)
	}
	if string(b[hMagic:hMagic+MagicSize]) != magic {
		return corrupt("bad magic %q (want %q)", b[:4], magic)
	}
	if v := le.Uint16(b[hVersion:]); v != FormatVersion {
		return corrupt("format version %d (this build reads %d)", v, FormatVersion)
	}
	if h := le.Uint16(b[hHeaderSize:]); h != HeaderSize {
		return corrupt("header size %d (want %d)", h, HeaderSize)
	}
	if total := le.Uint32(b[hTotalSize:]); uint64(total) != uint64(len(b)) || len(b) > MaxBlobSize {
		return corrupt("header says %d bytes, blob has %d", total, len(b))
	}
	if got, want := checksum(b), le.Uint32(b[hChecksum:]); got != want {
		return corrupt("checksum %#08x, header says %#08x", got, want)
	}
	if f := le.Uint32(b[hFlags:]); f != 0 {
		return corrupt("reserved header fields are not zero")
	}
	return checkSections(b)
}

// headerSections reads the section counts of a header whose counts are
// within the limits (checkSections).
func headerSections(b []byte) sections {
	return sections{
		svcs: int(le.Uint32(b[hServiceCount:])), nodes: int(le.Uint32(b[hNodeCount:])),
		eps: int(le.Uint32(b[hEndpointCnt:])), aux: int(le.Uint32(b[hAuxNodeCount:])),
		strs: int(le.Uint32(b[hStringsSize:])),
	}
}

func checkSections(b []byte) error {
	nSvc := uint64(le.Uint32(b[hServiceCount:]))
	nNodes := uint64(le.Uint32(b[hNodeCount:]))
	nEps := uint64(le.Uint32(b[hEndpointCnt:]))
	nAux := uint64(le.Uint32(b[hAuxNodeCount:]))
	if nSvc > MaxServices || nNodes > MaxNodes || nEps > MaxEndpoints || nAux > MaxNodes {
		return corrupt("%d services, %d nodes, %d endpoints, %d aux nodes exceed the limits", nSvc, nNodes, nEps, nAux)
	}
	nodesOff := HeaderSize + ServiceRecordSize*nSvc
	epsOff := nodesOff + NodeRecordSize*nNodes
	strOff := epsOff + EndpointRecordSize*nEps + PolicyRecordSize*nSvc + NodeRecordSize*nAux
	want := [...]uint64{HeaderSize, nodesOff, epsOff, strOff, strOff + uint64(le.Uint32(b[hStringsSize:]))}
	got := [...]uint64{
		uint64(le.Uint32(b[hServicesOff:])), uint64(le.Uint32(b[hNodesOff:])),
		uint64(le.Uint32(b[hEndpointsOff:])), uint64(le.Uint32(b[hStringsOff:])), uint64(len(b)),
	}
	if want != got {
		return corrupt("section offsets %v do not match the counts (want %v)", got, want)
	}
	return nil
}

func (t *Tree) decodeService(i int, s *Service, strs []byte, nodeFirst, epFirst, auxFirst uint32) error {
	r := t.ServiceRecord(i)
	*s = Service{
		Index: i, tree: t,
		Root: le.Uint32(r[sRoot:]), NodeCount: le.Uint32(r[sNodeCount:]),
		EpFirst: le.Uint32(r[sEpFirst:]), EpEligible: le.Uint32(r[sEpEligible:]), EpTotal: le.Uint32(r[sEpTotal:]),
		Mode: Mode(r[sMode]), Policy: Policy(r[sPolicy]), Health: Health(r[sHealth]),
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
	if err := t.checkEndpoints(s); err != nil {
		return err
	}
	if err := t.checkNodes(s); err != nil {
		return err
	}
	if err := t.checkAuxTrees(s); err != nil {
		return err
	}
	s.kids = [2]kids{newKids(t.nodes, s.Root, s.NodeCount), newKids(t.aux, s.AuxRoot[0], s.AuxCount[0]+s.AuxCount[1])}
	s.slots = newScopeSlots(s.Scopes)
	s.precomputeDistribute()
	s.precomputeLocalities()
	return nil
}

// decodePolicy reads and checks service i's policy record.
func (t *Tree) decodePolicy(i int, s *Service, auxFirst uint32) error {
	p := t.pols[i*PolicyRecordSize:][:PolicyRecordSize]
	s.AuxRoot = [2]uint32{le.Uint32(p[pDegradedRoot:]), le.Uint32(p[pUnhealthyRoot:])}
	s.AuxCount = [2]uint32{le.Uint32(p[pDegradedCount:]), le.Uint32(p[pUnhealthyCount:])}
	s.EpDegraded = le.Uint32(p[pEpDegraded:])
	s.OverprovisioningFactor = uint32(le.Uint16(p[pOverprovision:]))
	s.PanicThreshold = uint32(p[pPanic])
	s.Failover = make([]FailoverSpec, p[pFailoverCount])
	s.Distribute = make([]DistributeSpec, p[pDistributeCount])
	s.MinRank = int(p[pMinRank])
	if err := s.decodeNetworkRule(p, uint64(len(t.aux)/NodeRecordSize)); err != nil {
		return err
	}
	nAux := uint64(len(t.aux) / NodeRecordSize)
	switch {
	case p[pReserved] != 0:
		return corrupt("reserved policy bytes are not zero")
	case s.AuxRoot[0] != auxFirst || s.AuxCount[0] == 0 || s.AuxRoot[1] != s.AuxRoot[0]+s.AuxCount[0] || s.AuxCount[1] == 0 ||
		uint64(s.AuxRoot[1])+uint64(s.AuxCount[1]) > nAux:
		return corrupt("aux trees at %d (+%d) and %d (+%d) do not follow the previous service's (at %d) inside %d aux nodes", s.AuxRoot[0], s.AuxCount[0], s.AuxRoot[1], s.AuxCount[1], auxFirst, nAux)
	case uint64(s.EpEligible)+uint64(s.EpDegraded) > uint64(s.EpTotal), s.EpDegraded > 0 && s.Health == HealthAllowAll:
		return corrupt("%d degraded endpoints after %d eligible of %d (health %s)", s.EpDegraded, s.EpEligible, s.EpTotal, s.Health)
	case s.PanicThreshold > 100, s.OverprovisioningFactor == 0 && (s.PanicThreshold != 0 || len(s.Failover) != 0 || len(s.Distribute) != 0):
		return corrupt("panic threshold %d with overprovisioning factor %d", s.PanicThreshold, s.OverprovisioningFactor)
	case s.OverprovisioningFactor != 0 && s.Mode != ModeFailover:
		return corrupt("priority load in mode %s", s.Mode)
	case s.MinRank > int(t.ServiceRecord(i)[sLevels]), s.MinRank > 0 && (s.Mode != ModeFailover || len(s.Distribute) != 0):
		return corrupt("min_rank %d with %d levels in mode %s", s.MinRank, t.ServiceRecord(i)[sLevels], s.Mode)
	}
	return nil
}

// checkAuxTrees checks the trees over the degraded and the unhealthy
// endpoints as checkNodes does the main tree (their values are not stored,
// so their labels are not checked against values).
func (t *Tree) checkAuxTrees(s *Service) error {
	lo := s.EpFirst + s.EpEligible
	bounds := [3]uint32{lo, lo + s.EpDegraded, s.EpFirst + s.EpTotal}
	for k := range s.AuxRoot {
		v := treeView{nodes: t.aux, root: s.AuxRoot[k], count: s.AuxCount[k], lo: bounds[k], hi: bounds[k+1], levels: len(s.Scopes)}
		if err := v.check(); err != nil {
			return fmt.Errorf("%s tree: %w", [2]string{"degraded", "unhealthy"}[k], err)
		}
	}
	if !s.NetworkRule {
		return nil
	}
	lo = s.EpFirst + s.EpTotal
	v := treeView{nodes: t.aux, root: s.NetRoot, count: s.NetCount, lo: lo, hi: lo + s.EpEligible, levels: len(s.Scopes) - 1}
	if err := v.check(); err != nil {
		return fmt.Errorf("network tree: %w", err)
	}
	return nil
}

func checkServiceRecord(r []byte, s *Service, nodeFirst, epFirst uint32, t *Tree) error {
	levels := int(r[sLevels])
	switch {
	case levels < 1 || levels > MaxLevels:
		return corrupt("%d levels", levels)
	case s.Mode > ModeStrict || s.Policy > PolicyConsistentHash || s.Health > HealthAllowAll:
		return corrupt("mode %d, policy %d, health %d", s.Mode, s.Policy, s.Health)
	case s.Root != nodeFirst || s.NodeCount == 0 || uint64(s.Root)+uint64(s.NodeCount) > uint64(t.NumNodes()):
		return corrupt("nodes [%d, +%d) do not follow the previous service's (at %d) inside %d nodes", s.Root, s.NodeCount, nodeFirst, t.NumNodes())
	case s.EpFirst != epFirst || s.EpEligible > s.EpTotal || uint64(s.EpFirst)+uint64(s.EpTotal) > uint64(t.NumEndpoints()):
		return corrupt("endpoints [%d, +%d) do not follow the previous service's (at %d) inside %d endpoints", s.EpFirst, s.EpTotal, epFirst, t.NumEndpoints())
	case r[sVIPFamily] != 0 && r[sVIPFamily] != 4 && r[sVIPFamily] != 6:
		return corrupt("vip family %d", r[sVIPFamily])
	case r[sPad] != 0 || !allZero(r[sReserved:]):
		return corrupt("reserved service bytes are not zero")
	}
	if err := checkAffinity(r, s); err != nil {
		return err
	}
	if r[sVIPFamily] != 0 {
		s.VIP = getAddr(r[sVIPAddr:], r[sVIPPort:], r[sVIPFamily])
		if s.VIP.Port() == 0 || (r[sVIPFamily] == 4 && !allZero(r[sVIPAddr+4:sVIPPort])) {
			return corrupt("bad vip")
		}
	} else if !allZero(r[sVIPAddr:sPad]) {
		return corrupt("vip bytes without a vip family")
	}
	s.Scopes = make([]string, levels)
	return nil
}

// checkAffinity reads the session affinity timeout: only a consistent_hash
// service has one, and never more than a day.
func checkAffinity(r []byte, s *Service) error {
	s.AffinityTimeout = le.Uint32(r[sAffinity:])
	switch {
	case s.AffinityTimeout > MaxAffinityTimeout:
		return corrupt("affinity timeout %d (at most %d)", s.AffinityTimeout, MaxAffinityTimeout)
	case s.AffinityTimeout != 0 && s.Policy != PolicyConsistentHash:
		return corrupt("affinity timeout %d with policy %s", s.AffinityTimeout, s.Policy)
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
	off, n := uint64(le.Uint32(r[sMetaOff:])), uint64(le.Uint32(r[sMetaLen:]))
	if off+n > uint64(len(strs)) {
		return corrupt("metadata [%d, +%d) outside the %d-byte strings section", off, n, len(strs))
	}
	m := metaReader{b: strs[off : off+n]}
	s.Name = m.str()
	if m.err == nil && len(m.b) < 1 {
		return corrupt("metadata ends before the host count")
	}
	if m.err == nil {
		nHosts := int(m.b[0])
		m.b = m.b[1:]
		s.Hosts = make([]string, nHosts)
		for i := range s.Hosts {
			s.Hosts[i] = m.str()
		}
	}
	for i := range s.Scopes {
		s.Scopes[i] = m.str()
	}
	s.values = make([]string, s.NodeCount-1)
	for i := range s.values {
		s.values[i] = m.str()
	}
	for i := range s.Failover {
		s.Failover[i] = FailoverSpec{From: m.str(), To: m.str()}
	}
	m.readDistribute(s.Distribute)
	if m.err == nil && len(m.b) != 0 {
		return corrupt("%d bytes of metadata left over", len(m.b))
	}
	if m.err == nil && s.Name == "" {
		return corrupt("empty service name")
	}
	return m.err
}

// indexFailover checks the failover rules as Build does and hashes them.
func (s *Service) indexFailover() error {
	s.regionAt = slices.Index(s.Scopes, "region")
	if len(s.Failover) > 0 && s.regionAt < 0 {
		return corrupt("failover rules without a region scope")
	}
	s.failTo = make([][2]uint64, len(s.Failover))
	for i, r := range s.Failover {
		if r.From == "" || r.To == "" || r.From == r.To || slices.ContainsFunc(s.Failover[:i], func(o FailoverSpec) bool { return o.From == r.From }) {
			return corrupt("failover rule %d from %q to %q", i, r.From, r.To)
		}
		s.failTo[i] = [2]uint64{Label(r.From), Label(r.To)}
	}
	return nil
}

func (t *Tree) index(s *Service) error {
	for _, n := range append([]string{s.Name}, s.Hosts...) {
		if _, dup := t.byName[n]; dup {
			return corrupt("name or host %q appears twice", n)
		}
		t.byName[n] = s.Index
	}
	return nil
}

func (t *Tree) checkEndpoints(s *Service) error {
	if uint64(s.EpFirst)+uint64(s.EpTotal)+uint64(s.netCopies()) > uint64(t.NumEndpoints()) {
		return corrupt("the network rule's %d endpoint copies run past the %d endpoints", s.netCopies(), t.NumEndpoints())
	}
	var cum uint64
	for k := uint32(0); k < s.EpTotal+s.netCopies(); k++ {
		b := t.eps[int(s.EpFirst+k)*EndpointRecordSize:][:EndpointRecordSize]
		fam, flags := b[eFamily], b[eFlags]
		switch {
		case fam != 4 && fam != 6, fam == 4 && !allZero(b[eAddr+4:ePort]):
			return corrupt("endpoint %d: bad address family %d", s.EpFirst+k, fam)
		case b[ePort] == 0 && b[ePort+1] == 0:
			return corrupt("endpoint %d: port 0", s.EpFirst+k)
		case flags&^flagHealthy != 0:
			return corrupt("endpoint %d: unknown flags %#x", s.EpFirst+k, flags)
		case (k < s.EpEligible || k >= s.EpTotal) != (flags&flagHealthy != 0 || s.Health == HealthAllowAll):
			return corrupt("endpoint %d: health does not match its place", s.EpFirst+k)
		}
		cum += uint64(le.Uint32(b[eWeight:]))
		if le.Uint64(b[eCumWeight:]) != cum {
			return corrupt("endpoint %d: cumulative weight %d, want %d", s.EpFirst+k, le.Uint64(b[eCumWeight:]), cum)
		}
	}
	return t.checkNetworkCopies(s)
}

// checkNodes checks that the service's nodes form a breadth-first tree whose
// children are sorted by label and partition their parent's range, with every
// leaf at full depth, and that every label is the hash of its value.
func (t *Tree) checkNodes(s *Service) error {
	v := treeView{nodes: t.nodes, root: s.Root, count: s.NodeCount, lo: s.EpFirst, hi: s.EpFirst + s.EpEligible, levels: len(s.Scopes), values: s.values}
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
