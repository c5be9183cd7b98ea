package loader

import (
	"cmp"
	"encoding/binary"
	"slices"

	"github.com/loctree/loctree/bpf"
	"github.com/loctree/loctree/shared"
)

// noRegion is bpf.Service.RegionAt of a service without a scope "region".
const noRegion = 0xff

// hasLoads reports whether the kernel computes s's priority load: then it
// needs the aux trees, the failover rules and every endpoint, not only the
// eligible ones.
func hasLoads(s *shared.Service) bool { return s.OverprovisioningFactor != 0 }

// nodeLen is the number of node map entries s takes: its tree, and with a
// priority load its two aux trees and one entry per failover rule.
func nodeLen(s *shared.Service) uint32 {
	if !hasLoads(s) {
		return s.NodeCount + netCount(s)
	}
	return s.NodeCount + s.AuxCount[0] + s.AuxCount[1] + uint32(len(s.Failover))
}

// epLen is the number of endpoint map entries s takes: the eligible
// endpoints, or with a priority load all of them, or with the network rule
// all of them and the copies of the eligible ones that follow them.
func epLen(s *shared.Service) uint32 {
	switch {
	case hasLoads(s):
		return s.EpTotal
	case s.NetworkRule:
		return s.EpTotal + s.EpEligible
	}
	return s.EpEligible
}

// auxRecords are the records of s's degraded and unhealthy trees,
// consecutive in the aux section, copied as node records are.
func auxRecords(t *shared.Tree, s *shared.Service) []byte {
	if !hasLoads(s) {
		return nil
	}
	first, n := s.AuxRoot[0], s.AuxCount[0]+s.AuxCount[1]
	return t.AuxNodeRecords()[int(first)*shared.NodeRecordSize : int(first+n)*shared.NodeRecordSize]
}

// ruleRecords are s's failover rules as the kernel searches them: node
// records sorted by the from-region's label, the to-region's label in lo
// (low half) and hi (high half).
func ruleRecords(s *shared.Service) []byte {
	if !hasLoads(s) || len(s.Failover) == 0 {
		return nil
	}
	rules := make([][2]uint64, len(s.Failover))
	for i, r := range s.Failover {
		rules[i] = [2]uint64{shared.Label(r.From), shared.Label(r.To)}
	}
	slices.SortFunc(rules, func(a, b [2]uint64) int { return cmp.Compare(a[0], b[0]) })
	out := make([]byte, 0, len(rules)*shared.NodeRecordSize)
	for _, r := range rules {
		out = binary.LittleEndian.AppendUint64(out, r[0])
		out = binary.LittleEndian.AppendUint64(out, r[1])
		out = append(out, make([]byte, 8)...)
	}
	return out
}

// regionAt is the index of s's scope "region", or noRegion.
func regionAt(s *shared.Service) uint8 {
	if i := slices.Index(s.Scopes, "region"); i >= 0 {
		return uint8(i)
	}
	return noRegion
}

// setLoads fills the priority-load fields of v, a service whose nodes start
// at map index nb: the aux trees follow its own tree, the rules follow them.
func setLoads(v *bpf.Service, s *shared.Service, nb uint32) {
	v.MinRank = uint8(s.MinRank)
	if !hasLoads(s) {
		return
	}
	aux := nb + s.NodeCount
	v.Of = uint16(s.OverprovisioningFactor)
	v.Panic = uint8(s.PanicThreshold)
	v.RegionAt = regionAt(s)
	v.AuxDelta = aux - s.AuxRoot[0]
	v.AuxRoot = [2]uint32{aux, aux + s.AuxCount[0]}
	v.Rules = aux + s.AuxCount[0] + s.AuxCount[1]
	v.RuleCount = uint8(len(s.Failover))
}
