package shared

import (
	"fmt"
	"net/netip"
)

// encode lays prepared services out as one blob (docs/FORMAT.md).
func encode(svcs []*builtService, generation uint64) ([]byte, error) {
	var nNodes, nEps, nStr int
	for _, s := range svcs {
		nNodes += len(s.nodes)
		nEps += len(s.eps)
		nStr += s.metaSize()
	}
	nodesOff := HeaderSize + ServiceRecordSize*len(svcs)
	epsOff := nodesOff + NodeRecordSize*nNodes
	strOff := epsOff + EndpointRecordSize*nEps
	total := strOff + nStr
	if total > MaxBlobSize {
		return nil, fmt.Errorf("%w: encoded tree of %d bytes (limit %d)", ErrTooLarge, total, MaxBlobSize)
	}
	b := make([]byte, total)
	putHeader(b, generation, len(svcs), nNodes, nEps, nStr)
	var nodeBase, epBase int
	strs := b[strOff:strOff]
	for i, s := range svcs {
		rec := b[HeaderSize+i*ServiceRecordSize:]
		putService(rec, s, nodeBase, epBase, len(strs))
		strs = s.appendMeta(strs)
		for k := range s.nodes {
			putNode(b[nodesOff+(nodeBase+k)*NodeRecordSize:], &s.nodes[k], nodeBase, epBase)
		}
		var cum uint64
		for k, i := range s.order {
			e := &s.eps[i]
			cum += uint64(e.weight)
			putEndpoint(b[epsOff+(epBase+k)*EndpointRecordSize:], e, cum)
		}
		nodeBase += len(s.nodes)
		epBase += len(s.eps)
	}
	le.PutUint32(b[hChecksum:], checksum(b))
	return b, nil
}

func putHeader(b []byte, generation uint64, nSvc, nNodes, nEps, nStr int) {
	copy(b[hMagic:], Magic[:])
	le.PutUint16(b[hVersion:], FormatVersion)
	le.PutUint16(b[hHeaderSize:], HeaderSize)
	le.PutUint64(b[hGeneration:], generation)
	nodesOff := HeaderSize + ServiceRecordSize*nSvc
	epsOff := nodesOff + NodeRecordSize*nNodes
	strOff := epsOff + EndpointRecordSize*nEps
	le.PutUint32(b[hTotalSize:], uint32(strOff+nStr))
	le.PutUint32(b[hServiceCount:], uint32(nSvc))
	le.PutUint32(b[hNodeCount:], uint32(nNodes))
	le.PutUint32(b[hEndpointCnt:], uint32(nEps))
	le.PutUint32(b[hStringsSize:], uint32(nStr))
	le.PutUint32(b[hServicesOff:], HeaderSize)
	le.PutUint32(b[hNodesOff:], uint32(nodesOff))
	le.PutUint32(b[hEndpointsOff:], uint32(epsOff))
	le.PutUint32(b[hStringsOff:], uint32(strOff))
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
	if e.healthy {
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
