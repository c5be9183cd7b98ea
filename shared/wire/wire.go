// Package wire is the record-level layout of an encoded tree, byte for byte
// as docs/FORMAT.md documents it: record sizes, field offsets, and where one
// service's records sit in a blob. It is the one home of that layout: shared
// encodes and decodes with it, and the kernel installer copies records into
// BPF maps with it. It has no dependency beyond the standard library and
// builds for wasip1.
//
// Nothing here validates: the functions read blobs that shared.Decode has
// already checked, and the caller keeps the blob unchanged while it reads.
// A user of the Go library does not need this package: shared's Tree and
// Service are the read-only views over the same bytes.
package wire

import "encoding/binary"

// Record sizes (docs/FORMAT.md).
const (
	HeaderSize         = 64
	ServiceRecordSize  = 64
	NodeRecordSize     = 24
	EndpointRecordSize = 32
	PolicyRecordSize   = 32
)

// Header field offsets.
const (
	HMagic        = 0
	HVersion      = 4
	HHeaderSize   = 6
	HChecksum     = 8
	HFlags        = 12
	HGeneration   = 16
	HTotalSize    = 24
	HServiceCount = 28
	HNodeCount    = 32
	HEndpointCnt  = 36
	HStringsSize  = 40
	HServicesOff  = 44
	HNodesOff     = 48
	HEndpointsOff = 52
	HStringsOff   = 56
	HAuxNodeCount = 60
)

// Service record field offsets.
const (
	SRoot       = 0
	SNodeCount  = 4
	SEpFirst    = 8
	SEpEligible = 12
	SEpTotal    = 16
	SLevels     = 20
	SMode       = 21
	SPolicy     = 22
	SHealth     = 23
	SMetaOff    = 24
	SMetaLen    = 28
	SVIPAddr    = 32
	SVIPPort    = 48
	SVIPFamily  = 50
	SPad        = 51
	SAffinity   = 52
	SLoadHigh   = 56 // format version 6
	SLoadLow    = 58 // format version 6
	SReserved   = 60
)

// Policy record field offsets (format version 2; min_rank and
// distribute_count 3; network_rule and network_node_count 4).
const (
	PDegradedRoot    = 0
	PDegradedCount   = 4
	PUnhealthyRoot   = 8
	PUnhealthyCount  = 12
	PEpDegraded      = 16
	POverprovision   = 20
	PPanic           = 22
	PFailoverCount   = 23
	PMinRank         = 24 // format version 3
	PDistributeCount = 25 // format version 3
	PNetworkRule     = 26 // format version 4
	PReserved        = 27 // byte 27
	PNetworkCount    = 28 // format version 4
)

// Node record field offsets.
const (
	NLabel      = 0
	NLo         = 8
	NHi         = 12
	NFirstChild = 16
	NChildCount = 20
)

// Endpoint record field offsets.
const (
	EAddr      = 0
	EPort      = 16
	EFamily    = 18
	EFlags     = 19
	EWeight    = 20
	ECumWeight = 24

	FlagHealthy = 1
)

var le = binary.LittleEndian

// Sections are a blob's record sections, each a sub-slice of the blob.
type Sections struct {
	Services, Nodes, Endpoints, Policies, Aux []byte
}

// Split returns the record sections of a decoded blob.
func Split(blob []byte) Sections {
	svcs, nodes := le.Uint32(blob[HServicesOff:]), le.Uint32(blob[HNodesOff:])
	eps, strs := le.Uint32(blob[HEndpointsOff:]), le.Uint32(blob[HStringsOff:])
	nSvc := le.Uint32(blob[HServiceCount:])
	pols := eps + EndpointRecordSize*le.Uint32(blob[HEndpointCnt:])
	aux := pols + PolicyRecordSize*nSvc
	return Sections{
		Services: blob[svcs:nodes], Nodes: blob[nodes:eps], Endpoints: blob[eps:pols],
		Policies: blob[pols:aux], Aux: blob[aux:strs],
	}
}

// Layout is where one service's records sit: absolute record indices into
// the node, endpoint and aux node sections (docs/FORMAT.md, "Service record"
// and "Policy record").
type Layout struct {
	// Root and NodeCount: the service's nodes in the node section, root first.
	Root, NodeCount uint32
	// EpFirst: its first endpoint; EpEligible eligible endpoints come first,
	// then EpDegraded degraded ones, then the unhealthy ones, EpTotal in all.
	EpFirst, EpEligible, EpDegraded, EpTotal uint32
	// AuxRoot and AuxCount: the trees over the degraded (0) and the
	// unhealthy (1) endpoints in the aux node section.
	AuxRoot, AuxCount [2]uint32
	// NetRoot and NetCount: the network tree in the aux node section, after
	// the unhealthy tree (NetCount is 0 unless the service applies the
	// network rule).
	NetRoot, NetCount uint32
}

// ServiceLayout reads where service i's records sit in a decoded blob.
func ServiceLayout(blob []byte, i int) Layout {
	sec := Split(blob)
	r := sec.Services[i*ServiceRecordSize:][:ServiceRecordSize]
	p := sec.Policies[i*PolicyRecordSize:][:PolicyRecordSize]
	l := Layout{
		Root: le.Uint32(r[SRoot:]), NodeCount: le.Uint32(r[SNodeCount:]),
		EpFirst: le.Uint32(r[SEpFirst:]), EpEligible: le.Uint32(r[SEpEligible:]),
		EpDegraded: le.Uint32(p[PEpDegraded:]), EpTotal: le.Uint32(r[SEpTotal:]),
		AuxRoot:  [2]uint32{le.Uint32(p[PDegradedRoot:]), le.Uint32(p[PUnhealthyRoot:])},
		AuxCount: [2]uint32{le.Uint32(p[PDegradedCount:]), le.Uint32(p[PUnhealthyCount:])},
	}
	l.NetRoot, l.NetCount = l.AuxRoot[1]+l.AuxCount[1], le.Uint32(p[PNetworkCount:])
	return l
}

// AuxLen is the number of aux nodes of the degraded and unhealthy trees.
func (l Layout) AuxLen() uint32 { return l.AuxCount[0] + l.AuxCount[1] }

// Nodes are the n node records from index first of a node section (the
// node or the aux node section).
func Nodes(section []byte, first, n uint32) []byte {
	return section[int(first)*NodeRecordSize : int(first+n)*NodeRecordSize]
}

// Endpoints are the n endpoint records from index first.
func Endpoints(section []byte, first, n uint32) []byte {
	return section[int(first)*EndpointRecordSize : int(first+n)*EndpointRecordSize]
}
