package shared

import (
	"fmt"
	"net/netip"

	"github.com/loctree/loctree/shared/wire"
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

// Service is one service of a tree: a read-only view of its metadata and of
// where its nodes and endpoints are. Root, FirstEndpoint and the indices in a
// Range are absolute indices into the tree's node and endpoint arrays.
type Service struct {
	index  int
	name   string
	hosts  []string
	scopes []string
	mode   Mode
	policy Policy
	health Health
	vip    netip.AddrPort // invalid when the service has no L4 frontend
	// lay is where the service's records sit (docs/FORMAT.md): its nodes,
	// its endpoints (eligible, then degraded, then unhealthy), the trees
	// over its degraded and unhealthy endpoints, and its network tree.
	lay wire.Layout
	// overprovision (percent) is non-zero when the service uses Envoy's
	// priority load (Spillover); panicThreshold is in percent.
	overprovision  uint32
	panicThreshold uint32
	failover       []FailoverSpec   // format version 2
	distribute     []DistributeSpec // format version 3
	// affinityTimeout is the session affinity timeout in seconds of a
	// consistent_hash service; 0 when the service sets none.
	affinityTimeout uint32
	// loadHigh and loadLow are the band of load-aware widening (format
	// version 6), in requests in flight per eligible endpoint; 0: off.
	loadHigh, loadLow uint32
	// minRank bounds failover (format version 3): candidates and priorities
	// share at least the first minRank scopes with the source; 0 is
	// unbounded.
	minRank int
	// networkRule is set when the service applies the network rule (format
	// version 4): a source whose network has no eligible endpoint gets the
	// deepest match over the scopes after network, across all networks,
	// from the network tree (aux nodes [NetRoot, +NetCount)) over copies of
	// the eligible endpoints, [EpFirst+EpTotal, +EpEligible).
	networkRule bool
	// netOther is the network rule of a spillover service (format version
	// 5): the other-network tree (aux nodes [NetRoot, +NetCount)) over
	// otherCopies copies from EpFirst+EpTotal, per set and network m the
	// set's endpoints not on m (network.go sortOther).
	netOther    bool
	otherCopies uint32
	// otherRule is the network_rule byte of a service with netOther: 2
	// the network rule, or (format version 7) copies by a first scope
	// whose other values are one priority (3) or ranked by the locality
	// scopes only (4; network.go decideOther).
	otherRule uint8
	// classes is set (format version 8) when the copies hold a group per
	// class of endpoints before the locality (groups.go): groups, in
	// priority order, and first, the index of the first locality scope.
	classes bool
	groups  []otherGroup
	first   int

	tree      *Tree
	regionAt  int              // index of the "region" scope, or -1
	failTo    [][2]uint64      // labels of the failover rules: from, to
	dist      []distRule       // the distribute rules, hashed
	distLoads []Loads          // per rule, then for no rule: the loads of a source it applies to
	locDepth  int              // localities are the nodes at this depth (locality.go); 0: no locality draw
	locs      [4][]localityRec // the localities of the eligible and the degraded set, then of their other-network trees (locIndex)
	locCum    [4][]uint64      // their running effective weights (locs[k][i].cum), what a draw searches
	locAt     []uint32         // by endpoint - EpFirst (eligible and degraded, copies too): its locality in its locs
	distCum   [][2][]uint64    // per distribute rule (as distLoads): its running effective weights over locs
	distAlias [][2]aliasTable  // the same weights as alias tables, what a pick draws from
	values    []string         // node values, node Root+1 first
	kids      [2]kids          // child indexes: the eligible tree, the aux trees
	slots     scopeSlots       // where a Source keeps each scope's label
}

// child is the child labelled want of node n (an absolute index) in the
// trees of set: the eligible tree, or the degraded or unhealthy aux tree.
func (s *Service) child(set int, n uint32, want uint64) (uint32, bool) {
	k, base := &s.kids[0], s.lay.Root
	if set != setEligible {
		k, base = &s.kids[1], s.lay.AuxRoot[0]
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
func (t *Tree) Generation() uint64 { return le.Uint64(t.blob[wire.HGeneration:]) }

// Services returns the services sorted by name, Services()[i].Index() == i,
// in a new slice: a caller may reorder or drop its elements, not the tree's.
func (t *Tree) Services() []*Service {
	out := make([]*Service, len(t.services))
	for i := range t.services {
		out[i] = &t.services[i]
	}
	return out
}

// NumServices is the number of services.
func (t *Tree) NumServices() int { return len(t.services) }

// Service finds a service by name or by one of its hosts.
func (t *Tree) Service(nameOrHost string) (*Service, bool) {
	i, ok := t.byName[nameOrHost]
	if !ok {
		return nil, false
	}
	return &t.services[i], true
}

// NumNodes is the number of node records of all services.
func (t *Tree) NumNodes() int { return len(t.nodes) / wire.NodeRecordSize }

// NumEndpoints is the number of endpoint records of all services.
func (t *Tree) NumEndpoints() int { return len(t.eps) / wire.EndpointRecordSize }

// serviceRecord is the 64-byte record of service i, as in the blob.
func (t *Tree) serviceRecord(i int) []byte {
	off := wire.HeaderSize + i*wire.ServiceRecordSize
	return t.blob[off : off+wire.ServiceRecordSize : off+wire.ServiceRecordSize]
}

// Node decodes node i (an absolute index below NumNodes).
func (t *Tree) Node(i uint32) Node { return nodeAt(t.nodes, i) }

// AuxNode decodes node i of the aux section (the degraded and unhealthy trees).
func (t *Tree) AuxNode(i uint32) Node { return nodeAt(t.aux, i) }

func nodeAt(nodes []byte, i uint32) Node {
	b := nodes[int(i)*wire.NodeRecordSize:][:wire.NodeRecordSize]
	return Node{
		Label:      le.Uint64(b[wire.NLabel:]),
		Lo:         le.Uint32(b[wire.NLo:]),
		Hi:         le.Uint32(b[wire.NHi:]),
		FirstChild: le.Uint32(b[wire.NFirstChild:]),
		ChildCount: le.Uint32(b[wire.NChildCount:]),
	}
}

// Endpoint decodes endpoint i (an absolute index below NumEndpoints).
func (t *Tree) Endpoint(i uint32) Endpoint {
	b := t.eps[int(i)*wire.EndpointRecordSize:][:wire.EndpointRecordSize]
	return Endpoint{
		Addr:      getAddr(b[wire.EAddr:], b[wire.EPort:], b[wire.EFamily]),
		Weight:    le.Uint32(b[wire.EWeight:]),
		Healthy:   b[wire.EFlags]&wire.FlagHealthy != 0,
		CumWeight: le.Uint64(b[wire.ECumWeight:]),
	}
}

// NodeValue returns the scope value of node i of service s (the root's is "").
// It is for tools; lookups use labels.
func (s *Service) NodeValue(i uint32) string {
	if i <= s.lay.Root || i >= s.lay.Root+s.lay.NodeCount {
		return ""
	}
	return s.values[i-s.lay.Root-1]
}

// Levels is the number of routing scopes.
func (s *Service) Levels() int { return len(s.scopes) }

// Tree returns the tree the service belongs to.
func (s *Service) Tree() *Tree { return s.tree }

func (s *Service) String() string {
	return fmt.Sprintf("%s (%s, %s, %d endpoints)", s.name, s.mode, s.policy, s.lay.EpTotal)
}

// EndpointValues returns the scope values of eligible endpoint i (an absolute
// index in [EpFirst, EpFirst+EpEligible), or a network rule's copy of one,
// with the original's network) by
// walking down the tree: nil for an ineligible endpoint. It is for tools; it
// allocates.
func (s *Service) EndpointValues(i uint32) []string {
	if c := s.lay.EpFirst + s.lay.EpTotal; (s.networkRule || s.netOther) && i >= c && i < c+s.netCopies() {
		i = s.originalOf(i)
	}
	if i < s.lay.EpFirst || i >= s.lay.EpFirst+s.lay.EpEligible {
		return nil
	}
	out := make([]string, 0, len(s.scopes))
	n := s.tree.Node(s.lay.Root)
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
func (t *Tree) Checksum() uint32 { return le.Uint32(t.blob[wire.HChecksum:]) }
