package kernel

import (
	"encoding/binary"
	"net/netip"

	"github.com/loctree/loctree/bpf"
	"github.com/loctree/loctree/shared"
)

// FrontendOf is the frontends map key (bpf.MapFrontends) of a VIP: address and port in network
// byte order, as the programs read them from struct bpf_sock_addr.
func FrontendOf(vip netip.AddrPort) bpf.Frontend {
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
	for i, scope := range s.Scopes() {
		out[i] = shared.Label(src[scope])
	}
	return out
}

// scopeKeys are the labels of s's scope keys, which the programs match a
// cgroup's own locality against.
func scopeKeys(s *shared.Service) [shared.MaxLevels]uint64 {
	var out [shared.MaxLevels]uint64
	for i, scope := range s.Scopes() {
		out[i] = shared.Label(scope)
	}
	return out
}
