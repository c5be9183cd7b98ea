package loader

import (
	"crypto/sha256"
	"encoding/binary"
	"net/netip"

	"github.com/loctree/loctree/bpf"
	"github.com/loctree/loctree/shared"
)

// frontendOf is the frontends map key of a VIP: address and port in network
// byte order, as the programs read them from struct bpf_sock_addr.
func frontendOf(vip netip.AddrPort) bpf.Frontend {
	var fe bpf.Frontend
	raw := vip.Addr().As16()
	fe.Family = 6
	if vip.Addr().Is4() {
		a4 := vip.Addr().As4()
		raw = [16]byte{}
		copy(raw[:], a4[:])
		fe.Family = 4
	}
	for i := range fe.Addr {
		fe.Addr[i] = binary.NativeEndian.Uint32(raw[4*i:])
	}
	var port [2]byte
	binary.BigEndian.PutUint16(port[:], vip.Port())
	fe.Port = binary.NativeEndian.Uint16(port[:])
	return fe
}

// sourceLabels are the labels of a source locality for s's scopes, the
// vector the programs walk the tree with.
func sourceLabels(s *shared.Service, src shared.Locality) [shared.MaxLevels]uint64 {
	var out [shared.MaxLevels]uint64
	for i, scope := range s.Scopes {
		out[i] = shared.Label(src[scope])
	}
	return out
}

// records are the byte ranges of a service's nodes and eligible endpoints.
func records(t *shared.Tree, s *shared.Service) (nodes, eps []byte) {
	nodes = t.NodeRecords()[int(s.Root)*shared.NodeRecordSize : int(s.Root+s.NodeCount)*shared.NodeRecordSize]
	eps = t.EndpointRecords()[int(s.EpFirst)*shared.EndpointRecordSize : int(s.EpFirst+s.EpEligible)*shared.EndpointRecordSize]
	return nodes, eps
}

// digest identifies what the kernel sees of a service, independent of where
// the service sits in the tree: its settings, source labels, and its
// records with indices made relative to its own root and first endpoint.
// Equal digests mean the installed copy can stay.
func digest(t *shared.Tree, s *shared.Service, src [shared.MaxLevels]uint64) uint64 {
	h := sha256.New()
	var b [64]byte
	b[0], b[1], b[2], b[3] = byte(len(s.Scopes)), byte(s.Mode), byte(s.Policy), byte(s.Health)
	h.Write(b[:4])
	for _, l := range src {
		h.Write(binary.LittleEndian.AppendUint64(b[:0], l))
	}
	for i := s.Root; i < s.Root+s.NodeCount; i++ {
		n := t.Node(i)
		fc := n.FirstChild
		if n.ChildCount > 0 {
			fc -= s.Root
		}
		rec := binary.LittleEndian.AppendUint64(b[:0], n.Label)
		for _, v := range []uint32{n.Lo - s.EpFirst, n.Hi - s.EpFirst, fc, n.ChildCount} {
			rec = binary.LittleEndian.AppendUint32(rec, v)
		}
		h.Write(rec)
	}
	_, eps := records(t, s)
	h.Write(eps) // endpoint records hold no indices
	return binary.LittleEndian.Uint64(h.Sum(b[:0]))
}
