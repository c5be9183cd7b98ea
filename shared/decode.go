package shared

import (
	"bytes"
	"fmt"
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
		eps:      b[le.Uint32(b[hEndpointsOff:]):le.Uint32(b[hStringsOff:])],
	}
	strs := b[le.Uint32(b[hStringsOff:]):]
	var nodeNext, epNext uint32
	for i := range t.services {
		s := &t.services[i]
		if err := t.decodeService(i, s, strs, nodeNext, epNext); err != nil {
			return nil, fmt.Errorf("service %d: %w", i, err)
		}
		if i > 0 && t.services[i-1].Name >= s.Name {
			return nil, corrupt("service %d: %q is not sorted after %q", i, s.Name, t.services[i-1].Name)
		}
		if err := t.index(s); err != nil {
			return nil, err
		}
		nodeNext += s.NodeCount
		epNext += s.EpTotal
	}
	if int(nodeNext) != t.NumNodes() || int(epNext) != t.NumEndpoints() {
		return nil, corrupt("services cover %d nodes and %d endpoints of %d and %d", nodeNext, epNext, t.NumNodes(), t.NumEndpoints())
	}
	return t, nil
}

func checkHeader(b []byte) error {
	if len(b) < HeaderSize {
		return corrupt("%d bytes, shorter than the %d-byte header", len(b), HeaderSize)
	}
	if !bytes.Equal(b[hMagic:hMagic+4], Magic[:]) {
		return corrupt("bad magic %q (want %q)", b[:4], Magic[:])
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
	if f := le.Uint32(b[hFlags:]); f != 0 || le.Uint32(b[60:]) != 0 {
		return corrupt("reserved header fields are not zero")
	}
	return checkSections(b)
}

func checkSections(b []byte) error {
	nSvc := uint64(le.Uint32(b[hServiceCount:]))
	nNodes := uint64(le.Uint32(b[hNodeCount:]))
	nEps := uint64(le.Uint32(b[hEndpointCnt:]))
	if nSvc > MaxServices || nNodes > MaxNodes || nEps > MaxEndpoints {
		return corrupt("%d services, %d nodes, %d endpoints exceed the limits", nSvc, nNodes, nEps)
	}
	nodesOff := HeaderSize + ServiceRecordSize*nSvc
	epsOff := nodesOff + NodeRecordSize*nNodes
	strOff := epsOff + EndpointRecordSize*nEps
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

func (t *Tree) decodeService(i int, s *Service, strs []byte, nodeFirst, epFirst uint32) error {
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
	if err := s.decodeMeta(r, strs); err != nil {
		return err
	}
	if err := t.checkEndpoints(s); err != nil {
		return err
	}
	return t.checkNodes(s)
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
	case !allZero(r[sReserved:]):
		return corrupt("reserved service bytes are not zero")
	}
	if r[sVIPFamily] != 0 {
		s.VIP = getAddr(r[sVIPAddr:], r[sVIPPort:], r[sVIPFamily])
		if s.VIP.Port() == 0 || (r[sVIPFamily] == 4 && !allZero(r[sVIPAddr+4:sVIPPort])) {
			return corrupt("bad vip")
		}
	} else if !allZero(r[sVIPAddr:sReserved]) {
		return corrupt("vip bytes without a vip family")
	}
	s.Scopes = make([]string, levels)
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
	if m.err == nil && len(m.b) != 0 {
		return corrupt("%d bytes of metadata left over", len(m.b))
	}
	if m.err == nil && s.Name == "" {
		return corrupt("empty service name")
	}
	return m.err
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
	var cum uint64
	for k := uint32(0); k < s.EpTotal; k++ {
		b := t.eps[int(s.EpFirst+k)*EndpointRecordSize:][:EndpointRecordSize]
		fam, flags := b[eFamily], b[eFlags]
		switch {
		case fam != 4 && fam != 6, fam == 4 && !allZero(b[eAddr+4:ePort]):
			return corrupt("endpoint %d: bad address family %d", s.EpFirst+k, fam)
		case b[ePort] == 0 && b[ePort+1] == 0:
			return corrupt("endpoint %d: port 0", s.EpFirst+k)
		case flags&^flagHealthy != 0:
			return corrupt("endpoint %d: unknown flags %#x", s.EpFirst+k, flags)
		case (k < s.EpEligible) != (flags&flagHealthy != 0 || s.Health == HealthAllowAll):
			return corrupt("endpoint %d: health does not match its place", s.EpFirst+k)
		}
		cum += uint64(le.Uint32(b[eWeight:]))
		if le.Uint64(b[eCumWeight:]) != cum {
			return corrupt("endpoint %d: cumulative weight %d, want %d", s.EpFirst+k, le.Uint64(b[eCumWeight:]), cum)
		}
	}
	return nil
}

// checkNodes checks that the service's nodes form a breadth-first tree whose
// children are sorted by label and partition their parent's range, with every
// leaf at full depth, and that every label is the hash of its value.
func (t *Tree) checkNodes(s *Service) error {
	end := s.Root + s.NodeCount
	root := t.Node(s.Root)
	if root.Label != 0 || root.Lo != s.EpFirst || root.Hi != s.EpFirst+s.EpEligible {
		return corrupt("root node %d: label %#x, range [%d, %d), want 0 and [%d, %d)", s.Root, root.Label, root.Lo, root.Hi, s.EpFirst, s.EpFirst+s.EpEligible)
	}
	depth, levelEnd, next := 0, s.Root+1, s.Root+1
	for i := s.Root; i < end; i++ {
		if i == levelEnd {
			depth, levelEnd = depth+1, next
		}
		if i >= next && i != s.Root {
			return corrupt("node %d is nobody's child", i)
		}
		n := t.Node(i)
		if i != s.Root && Label(s.values[i-s.Root-1]) != n.Label {
			return corrupt("node %d: label %#x is not the hash of %q", i, n.Label, s.values[i-s.Root-1])
		}
		if err := t.checkChildren(s, i, n, depth, &next, end); err != nil {
			return err
		}
	}
	if next != end {
		return corrupt("nodes [%d, %d) are nobody's children", next, end)
	}
	return nil
}

func (t *Tree) checkChildren(s *Service, i uint32, n Node, depth int, next *uint32, end uint32) error {
	if n.ChildCount == 0 {
		if n.FirstChild != 0 || (depth != len(s.Scopes) && !(i == s.Root && n.Lo == n.Hi)) {
			return corrupt("node %d: leaf at depth %d of %d", i, depth, len(s.Scopes))
		}
		return nil
	}
	if depth >= len(s.Scopes) || n.FirstChild != *next || uint64(n.FirstChild)+uint64(n.ChildCount) > uint64(end) {
		return corrupt("node %d: children [%d, +%d) at depth %d are not the next nodes (%d) of the service", i, n.FirstChild, n.ChildCount, depth, *next)
	}
	lo, prev := n.Lo, uint64(0)
	for k := uint32(0); k < n.ChildCount; k++ {
		c := t.Node(n.FirstChild + k)
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
