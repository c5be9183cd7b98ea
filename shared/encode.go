package shared

import (
	"fmt"
	"net/netip"

	"github.com/loctree/loctree/shared/wire"
)

// sections are the element counts of a blob's sections.
type sections struct{ svcs, nodes, eps, aux, strs int }

// offsets are where the sections start, in the order of docs/FORMAT.md:
// services, nodes, endpoints, policies, aux nodes, strings; and the total.
func (c sections) offsets() (nodes, eps, pols, aux, strs, total int) {
	nodes = wire.HeaderSize + wire.ServiceRecordSize*c.svcs
	eps = nodes + wire.NodeRecordSize*c.nodes
	pols = eps + wire.EndpointRecordSize*c.eps
	aux = pols + wire.PolicyRecordSize*c.svcs
	strs = aux + wire.NodeRecordSize*c.aux
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
		putService(b[wire.HeaderSize+i*wire.ServiceRecordSize:], s, nodeBase, epBase, len(strs))
		strs = s.appendMeta(strs)
		for k := range s.nodes {
			putNode(b[nodesOff+(nodeBase+k)*wire.NodeRecordSize:], &s.nodes[k], nodeBase, epBase)
		}
		var cum uint64
		for k := range len(s.order) + len(s.netOrder) {
			e := &s.eps[s.at(uint32(k))]
			cum += uint64(e.weight)
			putEndpoint(b[epsOff+(epBase+k)*wire.EndpointRecordSize:], e, cum)
		}
		putPolicy(b[polsOff+i*wire.PolicyRecordSize:], s, auxBase)
		for _, tree := range s.aux {
			for k := range tree {
				putNode(b[auxOff+(auxBase+k)*wire.NodeRecordSize:], &tree[k], auxBase, epBase)
			}
			auxBase += len(tree)
		}
		nodeBase += len(s.nodes)
		epBase += len(s.eps) + len(s.netOrder)
	}
	le.PutUint32(b[wire.HChecksum:], checksum(b))
	return b, nil
}

func putHeader(b []byte, generation uint64, c sections) {
	copy(b[wire.HMagic:], magic)
	le.PutUint16(b[wire.HVersion:], FormatVersion)
	le.PutUint16(b[wire.HHeaderSize:], wire.HeaderSize)
	le.PutUint64(b[wire.HGeneration:], generation)
	nodesOff, epsOff, _, _, strOff, total := c.offsets()
	le.PutUint32(b[wire.HTotalSize:], uint32(total))
	le.PutUint32(b[wire.HServiceCount:], uint32(c.svcs))
	le.PutUint32(b[wire.HNodeCount:], uint32(c.nodes))
	le.PutUint32(b[wire.HEndpointCnt:], uint32(c.eps))
	le.PutUint32(b[wire.HStringsSize:], uint32(c.strs))
	le.PutUint32(b[wire.HServicesOff:], wire.HeaderSize)
	le.PutUint32(b[wire.HNodesOff:], uint32(nodesOff))
	le.PutUint32(b[wire.HEndpointsOff:], uint32(epsOff))
	le.PutUint32(b[wire.HStringsOff:], uint32(strOff))
	le.PutUint32(b[wire.HAuxNodeCount:], uint32(c.aux))
}

// putPolicy writes the service's policy record; auxBase is the absolute
// index of its degraded tree's root among the aux nodes.
func putPolicy(b []byte, s *builtService, auxBase int) {
	le.PutUint32(b[wire.PDegradedRoot:], uint32(auxBase))
	le.PutUint32(b[wire.PDegradedCount:], uint32(len(s.aux[0])))
	le.PutUint32(b[wire.PUnhealthyRoot:], uint32(auxBase+len(s.aux[0])))
	le.PutUint32(b[wire.PUnhealthyCount:], uint32(len(s.aux[1])))
	le.PutUint32(b[wire.PEpDegraded:], uint32(s.nDeg))
	if s.spill {
		le.PutUint16(b[wire.POverprovision:], uint16(s.of))
		b[wire.PPanic] = byte(s.panic)
	}
	b[wire.PFailoverCount] = byte(len(s.failover))
	b[wire.PDistributeCount] = byte(len(s.distribute))
	b[wire.PMinRank] = byte(s.minRank)
	if s.netRule || s.other != 0 {
		b[wire.PNetworkRule] = 1
		if s.other != 0 {
			b[wire.PNetworkRule] = s.other
		}
		if s.classes {
			b[wire.PNetworkRule] += withClasses
		}
		le.PutUint32(b[wire.PNetworkCount:], uint32(len(s.aux[2])))
	}
}

func putService(b []byte, s *builtService, nodeBase, epBase, metaOff int) {
	le.PutUint32(b[wire.SRoot:], uint32(nodeBase))
	le.PutUint32(b[wire.SNodeCount:], uint32(len(s.nodes)))
	le.PutUint32(b[wire.SEpFirst:], uint32(epBase))
	le.PutUint32(b[wire.SEpEligible:], uint32(s.nElig))
	le.PutUint32(b[wire.SEpTotal:], uint32(len(s.eps)))
	b[wire.SLevels] = byte(len(s.scopes))
	b[wire.SMode] = byte(s.mode)
	b[wire.SPolicy] = byte(s.policy)
	b[wire.SHealth] = byte(s.health)
	le.PutUint32(b[wire.SMetaOff:], uint32(metaOff))
	le.PutUint32(b[wire.SMetaLen:], uint32(s.metaSize()))
	le.PutUint32(b[wire.SAffinity:], s.affinity)
	le.PutUint16(b[wire.SLoadHigh:], uint16(s.loadHigh))
	le.PutUint16(b[wire.SLoadLow:], uint16(s.loadLow))
	if s.vip.IsValid() {
		putAddr(b[wire.SVIPAddr:], b[wire.SVIPPort:], &b[wire.SVIPFamily], s.vip)
	}
}

func putNode(b []byte, n *builtNode, nodeBase, epBase int) {
	le.PutUint64(b[wire.NLabel:], n.label)
	le.PutUint32(b[wire.NLo:], uint32(epBase)+n.lo)
	le.PutUint32(b[wire.NHi:], uint32(epBase)+n.hi)
	if n.childCount > 0 {
		le.PutUint32(b[wire.NFirstChild:], uint32(nodeBase)+n.firstChild)
		le.PutUint32(b[wire.NChildCount:], n.childCount)
	}
}

func putEndpoint(b []byte, e *builtEndpoint, cum uint64) {
	putAddr(b[wire.EAddr:], b[wire.EPort:], &b[wire.EFamily], e.addr)
	if e.healthy && !e.degraded {
		b[wire.EFlags] = wire.FlagHealthy
	}
	le.PutUint32(b[wire.EWeight:], e.weight)
	le.PutUint64(b[wire.ECumWeight:], cum)
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
