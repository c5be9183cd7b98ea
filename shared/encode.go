package shared

import (
	"fmt"
	"net/netip"
)

// sections are the element counts of a blob's sections.
type sections struct{ svcs, nodes, eps, aux, strs int }

// offsets are where the sections start, in the order of docs/FORMAT.md:
// services, nodes, endpoints, policies, aux nodes, strings; and the total.
func (c sections) offsets() (nodes, eps, pols, aux, strs, total int) {
	nodes = HeaderSize + ServiceRecordSize*c.svcs
	eps = nodes + NodeRecordSize*c.nodes
	pols = eps + EndpointRecordSize*c.eps
	aux = pols + PolicyRecordSize*c.svcs
	strs = aux + NodeRecordSize*c.aux
	return nodes, eps, pols, aux, strs, strs + c.strs
}

// encode lays prepared services out as one blob (docs/FORMAT.md).
func encode(svcs []*builtService, generation uint64) ([]byte, error) {
	c := sections{svcs: len(svcs)}
	for _, s := range svcs {
		c.nodes += len(s.nodes)
		c.eps += len(s.eps) + len(s.netOrder)
		c.aux += len(s.aux[0]) + len(s.aux[1]) + len(s.aux[2])
		c.strs += s.metaSize()
	}
	nodesOff, epsOff, polsOff, auxOff, strOff, total := c.offsets()
	if total > MaxBlobSize {
		return nil, fmt.Errorf("%w: encoded tree of %d bytes (limit %d)", ErrTooLarge, total, MaxBlobSize)
	}
	b := make([]byte, total)
	putHeader(b, generation, c)
	var nodeBase, epBase, auxBase int
	strs := b[strOff:strOff]
	for i, s := range svcs {
		putService(b[HeaderSize+i*ServiceRecordSize:], s, nodeBase, epBase, len(strs))
		strs = s.appendMeta(strs)
		for k := range s.nodes {
			putNode(b[nodesOff+(nodeBase+k)*NodeRecordSize:], &s.nodes[k], nodeBase, epBase)
		}
		var cum uint64
		for k := range len(s.order) + len(s.netOrder) {
			e := &s.eps[s.at(uint32(k))]
			cum += uint64(e.weight)
			putEndpoint(b[epsOff+(epBase+k)*EndpointRecordSize:], e, cum)
		}
		putPolicy(b[polsOff+i*PolicyRecordSize:], s, auxBase)
		for _, tree := range s.aux {
			for k := range tree {
				putNode(b[auxOff+(auxBase+k)*NodeRecordSize:], &tree[k], auxBase, epBase)
			}
			auxBase += len(tree)
		}
		nodeBase += len(s.nodes)
		epBase += len(s.eps) + len(s.netOrder)
	}
	le.PutUint32(b[hChecksum:], checksum(b))
	return b, nil
}

func putHeader(b []byte, generation uint64, c sections) {
	copy(b[hMagic:], magic)
	le.PutUint16(b[hVersion:], FormatVersion)
	le.PutUint16(b[hHeaderSize:], HeaderSize)
	le.PutUint64(b[hGeneration:], generation)
	nodesOff, epsOff, _, _, strOff, total := c.offsets()
	le.PutUint32(b[hTotalSize:], uint32(total))
	le.PutUint32(b[hServiceCount:], uint32(c.svcs))
	le.PutUint32(b[hNodeCount:], uint32(c.nodes))
	le.PutUint32(b[hEndpointCnt:], uint32(c.eps))
	le.PutUint32(b[hStringsSize:], uint32(c.strs))
	le.PutUint32(b[hServicesOff:], HeaderSize)
	le.PutUint32(b[hNodesOff:], uint32(nodesOff))
	le.PutUint32(b[hEndpointsOff:], uint32(epsOff))
	le.PutUint32(b[hStringsOff:], uint32(strOff))
	le.PutUint32(b[hAuxNodeCount:], uint32(c.aux))
}

// putPolicy writes the service's policy record; auxBase is the absolute
// index of its degraded tree's root among the aux nodes.
func putPolicy(b []byte, s *builtService, auxBase int) {
	le.PutUint32(b[pDegradedRoot:], uint32(auxBase))
	le.PutUint32(b[pDegradedCount:], uint32(len(s.aux[0])))
	le.PutUint32(b[pUnhealthyRoot:], uint32(auxBase+len(s.aux[0])))
	le.PutUint32(b[pUnhealthyCount:], uint32(len(s.aux[1])))
	le.PutUint32(b[pEpDegraded:], uint32(s.nDeg))
	if s.spill {
		le.PutUint16(b[pOverprovision:], uint16(s.of))
		b[pPanic] = byte(s.panic)
	}
	b[pFailoverCount] = byte(len(s.failover))
	b[pDistributeCount] = byte(len(s.distribute))
	b[pMinRank] = byte(s.minRank)
	if s.netRule {
		b[pNetworkRule] = 1
		le.PutUint32(b[pNetworkCount:], uint32(len(s.aux[2])))
	}
}

func putService(b []byte, s *builtService, nodeBase, epBase, metaOff int) {
	le.PutUint32(b[sRoot:], uint32(nodeBase))
	le.PutUint32(b[sNodeCount:], uint32(len(s.nodes)))
	le.PutUint32(b[sEpFirst:], uint32(epBase))
	le.PutUint32(b[sEpEligible:], uint32(s.nElig))
	le.PutUint32(b[sEpTotal:], uint32(len(s.eps)))
	b[sLevels] = byte(len(s.scopes))
	b[sMode] = byte(s.mode)
	b[sPolicy] = byte(s.policy)
	b[sHealth] = byte(s.health)
	le.PutUint32(b[sMetaOff:], uint32(metaOff))
	le.PutUint32(b[sMetaLen:], uint32(s.metaSize()))
	le.PutUint32(b[sAffinity:], s.affinity)
	if s.vip.IsValid() {
		putAddr(b[sVIPAddr:], b[sVIPPort:], &b[sVIPFamily], s.vip)
	}
}

func putNode(b []byte, n *builtNode, nodeBase, epBase int) {
	le.PutUint64(b[nLabel:], n.label)
	le.PutUint32(b[nLo:], uint32(epBase)+n.lo)
	le.PutUint32(b[nHi:], uint32(epBase)+n.hi)
	if n.childCount > 0 {
		le.PutUint32(b[nFirstChild:], uint32(nodeBase)+n.firstChild)
		le.PutUint32(b[nChildCount:], n.childCount)
	}
}

func putEndpoint(b []byte, e *builtEndpoint, cum uint64) {
	putAddr(b[eAddr:], b[ePort:], &b[eFamily], e.addr)
	if e.healthy && !e.degraded {
		b[eFlags] = flagHealthy
	}
	le.PutUint32(b[eWeight:], e.weight)
	le.PutUint64(b[eCumWeight:], cum)
}

// putAddr writes a 16-byte address, a network-order port and a family byte.
func putAddr(addr, port []byte, family *byte, ap netip.AddrPort) {
	a := ap.Addr()
	if a.Is4() {
		v4 := a.As4()
		copy(addr, v4[:])
		*family = 4
	} else {
		v6 := a.As16()
		copy(addr, v6[:])
		*family = 6
	}
	port[0], port[1] = byte(ap.Port()>>8), byte(ap.Port())
}

func getAddr(addr, port []byte, family byte) netip.AddrPort {
	p := uint16(port[0])<<8 | uint16(port[1])
	switch family {
	case 4:
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(addr[:4])), p)
	case 6:
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte(addr[:16])), p)
	}
	return netip.AddrPort{}
}
