package kernel

import (
	"encoding/binary"
	"hash"

	"github.com/loctree/loctree/bpf"
	"github.com/loctree/loctree/shared"
	"github.com/loctree/loctree/shared/wire"
)

// netCount is the number of node map entries s's network tree takes
// (docs/FORMAT.md "Network rule"); 0 without the rule.
func netCount(s *shared.Service) uint32 {
	if !s.NetworkRule() {
		return 0
	}
	return layoutOf(s).NetCount
}

// netRecords are the records of s's network tree as the kernel reads them:
// they follow its own tree in its node region, and their child indices are
// rebased from the aux section to the service's own tree's, so the kernel
// walks them with node_delta as it walks the service's tree (bpf/lib/lookup.h
// lt_lookup). Their endpoint ranges, over the copies that follow the
// service's endpoints, need no change.
func netRecords(t *shared.Tree, s *shared.Service) []byte {
	if !s.NetworkRule() {
		return nil
	}
	l := layoutOf(s)
	recs := wire.Nodes(wire.Split(t.Bytes()).Aux, l.NetRoot, l.NetCount)
	out := make([]byte, len(recs))
	copy(out, recs)
	rebase := l.Root + l.NodeCount - l.NetRoot // record index in the aux section → as if in the node section
	for off := 0; off < len(out); off += wire.NodeRecordSize {
		n := out[off : off+wire.NodeRecordSize]
		if binary.LittleEndian.Uint32(n[20:]) > 0 { // child_count
			binary.LittleEndian.PutUint32(n[16:], binary.LittleEndian.Uint32(n[16:])+rebase)
		}
	}
	return out
}

// setNetworkRule marks v, a service whose nodes start at map index nb, as
// applying the network rule: the network tree's root follows its own tree.
func setNetworkRule(v *bpf.Service, s *shared.Service, nb uint32) {
	if !s.NetworkRule() {
		return
	}
	v.NetRule = 1
	v.AuxRoot[0] = nb + layoutOf(s).NodeCount
}

// affinityLen is the number of endpoints of s's region the kernel finds a
// consistent_hash client's backend among by address (affinity.h): a
// network rule's copies (and a spillover service's other-network copies)
// are left out, so an address maps to its endpoint in the service's own
// order. A client on a network without endpoints
// keeps its backend through its last index while an update leaves it in
// place.
func affinityLen(s *shared.Service) uint32 {
	switch {
	case s.NetworkRule():
		return s.EligibleCount()
	case s.NetworkPriorities():
		return s.EndpointCount()
	}
	return epLen(s)
}

// digestNetwork adds the network rule to a service's digest: the rule and
// the network tree's records, their indices relative to its root and the
// service's first endpoint.
func digestNetwork(h hash.Hash, t *shared.Tree, s *shared.Service) {
	if !s.NetworkRule() {
		return
	}
	h.Write([]byte("network rule"))
	l := layoutOf(s)
	digestNodes(h, t.AuxNode, l.NetRoot, l.NetCount, l.EpFirst, nil)
}
