package shared

import (
	"fmt"
	"net/netip"
)

// Tree is a decoded tree. It reads records straight from the blob it was
// decoded from; the blob must not change while the Tree is in use. A Tree is
// immutable and safe for concurrent use.
type Tree struct {
	blob     []byte
	services []Service
	byName   map[string]int
	nodes    []byte // the node section
	eps      []byte // the endpoint section
	pols     []byte // the policy section
	aux      []byte // the aux node section (degraded, unhealthy and network trees)
}

// Service is one service of a tree: its metadata and where its nodes and
// endpoints are. Root, EpFirst and the indices in a Range are absolute indices
// into the tree's node and endpoint arrays.
type Service struct {
	Index      int
	Name       string
	Hosts      []string
	Scopes     []string
	Mode       Mode
	Policy     Policy
	Health     Health
	VIP        netip.AddrPort // invalid when the service has no L4 frontend
	Root       uint32
	NodeCount  uint32
	EpFirst    uint32
	EpEligible uint32
	EpTotal    uint32
	// EpDegraded degraded endpoints follow the eligible ones; the
	// unhealthy ones follow them (format version 2).
	EpDegraded uint32
	// OverprovisioningFactor (percent) is non-zero when the service uses
	// Envoy's priority load (Spillover); PanicThreshold is in percent.
	OverprovisioningFactor uint32
	PanicThreshold         uint32
	// AuxRoot and AuxCount locate the trees over the degraded (0) and the
	// unhealthy (1) endpoints in the aux node section.
	AuxRoot, AuxCount [2]uint32
	// Failover are the service's failover rules (format version 2).
	Failover []FailoverSpec
	// Distribute are the service's distribute rules (format version 3).
	Distribute []DistributeSpec
	// AffinityTimeout is the session affinity timeout in seconds of a
	// consistent_hash service; 0 when the service sets none (the kernel then
	// uses DefaultAffinityTimeout).
	AffinityTimeout uint32
	// MinRank bounds failover (format version 3): candidates and priorities
	// share at least the first MinRank scopes with the source; 0 is
	// unbounded.
	MinRank int
	// NetworkRule is set when the service applies the network rule (format
	// version 4): a source whose network has no eligible endpoint gets the
	// deepest match over the scopes after network, across all networks,
	// from the network tree (aux nodes [NetRoot, +NetCount)) over copies of
	// the eligible endpoints, [EpFirst+EpTotal, +EpEligible).
	NetworkRule       bool
	NetRoot, NetCount uint32

	tree      *Tree
	regionAt  int              // index of the "region" scope, or -1
	failTo    [][2]uint64      // labels of the failover rules: from, to
	dist      []distRule       // the distribute rules, hashed
	distLoads []Loads          // per rule, then for no rule: the loads of a source it applies to
	locDepth  int              // localities are the nodes at this depth (locality.go); 0: no locality draw
	locs      [2][]localityRec // the localities of the eligible and the degraded set
	locCum    [2][]uint64      // their running effective weights (locs[set][i].cum), what a draw searches
	locAt     []uint32         // by endpoint - EpFirst (eligible and degraded): its locality in its set's locs
	values    []string         // node values, node Root+1 first
	kids      [2]kids          // child indexes: the eligible tree, the aux trees
	slots     scopeSlots       // where a Source keeps each scope's label
}

// child is the child labelled want of node n (an absolute index) in the
// trees of set: the eligible tree, or the degraded or unhealthy aux tree.
func (s *Service) child(set int, n uint32, want uint64) (uint32, bool) {
	k, base := &s.kids[0], s.Root
	if set != setEligible {
		k, base = &s.kids[1], s.AuxRoot[0]
	}
	c, ok := k.child(n-base, want)
	return c + base, ok
}

// nodesOf is the node section that holds the trees of set.
func (s *Service) nodesOf(set int) []byte {
	if set == setEligible {
		return s.tree.nodes
	}
	return s.tree.aux
}

// Endpoint is a decoded endpoint record.
type Endpoint struct {
	Addr      netip.AddrPort
	Weight    uint32
	Healthy   bool
	CumWeight uint64
}

// Node is a decoded node record.
type Node struct {
	Label      uint64
	Lo, Hi     uint32
	FirstChild uint32
	ChildCount uint32
}

// Bytes returns the encoded tree. Callers must not modify it.
func (t *Tree) Bytes() []byte { return t.blob }

// Generation is the generation written by the builder.
func (t *Tree) Generation() uint64 { return le.Uint64(t.blob[hGeneration:]) }

// Services returns the services sorted by name; Services()[i].Index == i.
func (t *Tree) Services() []Service { return t.services }

// Service finds a service by name or by one of its hosts.
func (t *Tree) Service(nameOrHost string) (*Service, bool) {
	i, ok := t.byName[nameOrHost]
	if !ok {
		return nil, false
	}
	return &t.services[i], true
}

// NumNodes is the number of node records of all services.
func (t *Tree) NumNodes() int { return len(t.nodes) / NodeRecordSize }

// NumEndpoints is the number of endpoint records of all services.
func (t *Tree) NumEndpoints() int { return len(t.eps) / EndpointRecordSize }

// ServiceRecord returns the 64-byte record of service i, as in the blob.
func (t *Tree) ServiceRecord(i int) []byte {
	off := HeaderSize + i*ServiceRecordSize
	return t.blob[off : off+ServiceRecordSize : off+ServiceRecordSize]
}

// NodeRecords returns the whole node section (NodeRecordSize bytes a node).
func (t *Tree) NodeRecords() []byte { return t.nodes }

// EndpointRecords returns the whole endpoint section (EndpointRecordSize bytes an endpoint).
func (t *Tree) EndpointRecords() []byte { return t.eps }

// Node decodes node i (an absolute index below NumNodes).
func (t *Tree) Node(i uint32) Node { return nodeAt(t.nodes, i) }

// AuxNode decodes node i of the aux section (the degraded and unhealthy trees).
func (t *Tree) AuxNode(i uint32) Node { return nodeAt(t.aux, i) }

// AuxNodeRecords returns the whole aux node section.
func (t *Tree) AuxNodeRecords() []byte { return t.aux }

func nodeAt(nodes []byte, i uint32) Node {
	b := nodes[int(i)*NodeRecordSize:][:NodeRecordSize]
	return Node{
		Label:      le.Uint64(b[nLabel:]),
		Lo:         le.Uint32(b[nLo:]),
		Hi:         le.Uint32(b[nHi:]),
		FirstChild: le.Uint32(b[nFirstChild:]),
		ChildCount: le.Uint32(b[nChildCount:]),
	}
}

// Endpoint decodes endpoint i (an absolute index below NumEndpoints).
func (t *Tree) Endpoint(i uint32) Endpoint {
	b := t.eps[int(i)*EndpointRecordSize:][:EndpointRecordSize]
	return Endpoint{
		Addr:      getAddr(b[eAddr:], b[ePort:], b[eFamily]),
		Weight:    le.Uint32(b[eWeight:]),
		Healthy:   b[eFlags]&flagHealthy != 0,
		CumWeight: le.Uint64(b[eCumWeight:]),
	}
}

// NodeValue returns the scope value of node i of service s (the root's is "").
// It is for tools; lookups use labels.
func (s *Service) NodeValue(i uint32) string {
	if i <= s.Root || i >= s.Root+s.NodeCount {
		return ""
	}
	return s.values[i-s.Root-1]
}

// Levels is the number of routing scopes.
func (s *Service) Levels() int { return len(s.Scopes) }

// Tree returns the tree the service belongs to.
func (s *Service) Tree() *Tree { return s.tree }

func (s *Service) String() string {
	return fmt.Sprintf("%s (%s, %s, %d endpoints)", s.Name, s.Mode, s.Policy, s.EpTotal)
}

// EndpointValues returns the scope values of eligible endpoint i (an absolute
// index in [EpFirst, EpFirst+EpEligible), or a network rule's copy of one) by
// walking down the tree: nil for an ineligible endpoint. It is for tools; it
// allocates.
func (s *Service) EndpointValues(i uint32) []string {
	if c := s.EpFirst + s.EpTotal; s.NetworkRule && i >= c && i < c+s.EpEligible {
		i = s.originalOf(i)
	}
	if i < s.EpFirst || i >= s.EpFirst+s.EpEligible {
		return nil
	}
	out := make([]string, 0, len(s.Scopes))
	n := s.tree.Node(s.Root)
	for n.ChildCount > 0 {
		k := n.FirstChild
		for ; k < n.FirstChild+n.ChildCount-1; k++ {
			if i < s.tree.Node(k).Hi {
				break
			}
		}
		out = append(out, s.NodeValue(k))
		n = s.tree.Node(k)
	}
	return out
}

// Checksum is the CRC-32C of the blob from the header (docs/FORMAT.md):
// with the generation it identifies the content.
func (t *Tree) Checksum() uint32 { return le.Uint32(t.blob[hChecksum:]) }
