package kernel

import (
	"cmp"
	"encoding/binary"
	"slices"

	"github.com/loctree/loctree/bpf"
	"github.com/loctree/loctree/shared"
	"github.com/loctree/loctree/shared/wire"
)

// noRegion is bpf.Service.RegionAt of a service without a scope "region".
const noRegion = 0xff

// hasLoads reports whether the kernel computes s's priority load: then it
// needs the aux trees, the failover rules and every endpoint, not only the
// eligible ones.
func hasLoads(s *shared.Service) bool { return s.OverprovisioningFactor() != 0 }

// nodeLen is the number of node map entries s takes: its tree, and with a
// priority load its two aux trees and one entry per failover rule.
func nodeLen(s *shared.Service) uint32 {
	if !hasLoads(s) {
		return layoutOf(s).NodeCount + netCount(s)
	}
	l := layoutOf(s)
	return l.NodeCount + auxLen(s) + uint32(len(s.Failover())) + distLen(s) + locLen(s)
}

// auxLen is the aux node records s installs after its own tree: its
// degraded and unhealthy trees, and with NetworkPriorities its
// other-network tree, which follows them in the aux section.
func auxLen(s *shared.Service) uint32 {
	l := layoutOf(s)
	if s.NetworkPriorities() {
		return l.AuxLen() + l.NetCount
	}
	return l.AuxLen()
}

// locLen is the node map entries of s's localities (bpf/lib/locality.h):
// the eligible set's, then the degraded set's; with distribute rules, the
// blocks of every rule (distLocalities).
func locLen(s *shared.Service) uint32 {
	if !hasLoads(s) || s.LocalityDepth() == 0 {
		return 0
	}
	if len(s.Distribute()) == 0 {
		n := locN(s)
		return n[0] + n[1] + n[2] + n[3]
	}
	n := 0
	for k := range len(s.Distribute()) + 1 {
		locs := distLocalities(s, k)
		n += len(locs[0]) + len(locs[1])
	}
	return uint32(n)
}

// distLocalities are rule block k's locality records (bpf/lib/distribute.h),
// per set: the localities with a weight under the rule, in endpoint order,
// with the running sums of the rule's effective weights. The others can
// never be drawn, and each adds 0 to the running sums, so leaving them out
// keeps the sums right and the blocks as small as the rules' targets.
func distLocalities(s *shared.Service, k int) [2][]shared.LocalityWeight {
	var out [2][]shared.LocalityWeight
	for set, degraded := range []bool{false, true} {
		prev := uint64(0)
		for _, w := range s.RuleLocalityWeights(k, degraded) {
			if w.Cum > prev {
				out[set] = append(out[set], w)
			}
			prev = w.Cum
		}
	}
	return out
}

// locRecords are s's localities as the kernel searches them: per set, in
// endpoint order, a node record with the locality's endpoints in lo and hi
// and the running sum of the set's effective weights in label; with
// distribute rules, each rule block's (issue 26 item 5).
func locRecords(s *shared.Service) []byte {
	if locLen(s) == 0 {
		return nil
	}
	out := make([]byte, 0, int(locLen(s))*wire.NodeRecordSize)
	if len(s.Distribute()) == 0 {
		out = appendLocalities(appendLocalities(out, s.LocalityWeights(false)), s.LocalityWeights(true))
		return appendLocalities(appendLocalities(out, s.OtherLocalityWeights(false)), s.OtherLocalityWeights(true))
	}
	for k := range len(s.Distribute()) + 1 {
		locs := distLocalities(s, k)
		out = appendLocalities(appendLocalities(out, locs[0]), locs[1])
	}
	return out
}

// locN is the number of locality records of s's eligible and degraded
// sets, then of their other-network trees (bpf lt_service.loc_n).
func locN(s *shared.Service) [4]uint32 {
	return [4]uint32{uint32(len(s.LocalityWeights(false))), uint32(len(s.LocalityWeights(true))),
		uint32(len(s.OtherLocalityWeights(false))), uint32(len(s.OtherLocalityWeights(true)))}
}

// appendLocalities appends one node record per locality.
func appendLocalities(out []byte, ws []shared.LocalityWeight) []byte {
	for _, w := range ws {
		out = appendNode(out, w.Cum, w.Span.Lo, w.Span.Hi, 0, 0)
	}
	return out
}

// distStride is the node records of one distribute rule's block
// (bpf/lib/distribute.h): three for its from and priority, three per target.
const distStride = 3 + 3*shared.MaxDistributeTargets

// distLen is the node map entries of s's distribute rules: a block per
// rule and one for a source no rule applies to.
func distLen(s *shared.Service) uint32 {
	if len(s.Distribute()) == 0 {
		return 0
	}
	return uint32(len(s.Distribute())+1) * distStride
}

// epLen is the number of endpoint map entries s takes: the eligible
// endpoints, or with a priority load all of them, or with the network rule
// all of them and the copies of the eligible ones that follow them.
func epLen(s *shared.Service) uint32 {
	switch {
	case hasLoads(s):
		return s.EndpointCount() + s.NetworkCopies()
	case s.NetworkRule():
		return s.EndpointCount() + s.EligibleCount()
	}
	return s.EligibleCount()
}

// auxRecords are the records of s's degraded and unhealthy trees,
// consecutive in the aux section, copied as node records are.
func auxRecords(t *shared.Tree, s *shared.Service) []byte {
	if !hasLoads(s) {
		return nil
	}
	l := layoutOf(s)
	return wire.Nodes(wire.Split(t.Bytes()).Aux, l.AuxRoot[0], auxLen(s))
}

// ruleRecords are s's failover rules as the kernel searches them: node
// records sorted by the from-region's label, the to-region's label in lo
// (low half) and hi (high half).
func ruleRecords(s *shared.Service) []byte {
	if hasLoads(s) && len(s.Distribute()) > 0 {
		return distRecords(s)
	}
	if !hasLoads(s) || len(s.Failover()) == 0 {
		return nil
	}
	rules := make([][2]uint64, len(s.Failover()))
	for i, r := range s.Failover() {
		rules[i] = [2]uint64{shared.Label(r.From), shared.Label(r.To)}
	}
	slices.SortFunc(rules, func(a, b [2]uint64) int { return cmp.Compare(a[0], b[0]) })
	out := make([]byte, 0, len(rules)*wire.NodeRecordSize)
	for _, r := range rules {
		out = binary.LittleEndian.AppendUint64(out, r[0])
		out = binary.LittleEndian.AppendUint64(out, r[1])
		out = append(out, make([]byte, 8)...)
	}
	return out
}

// regionAt is the index of s's scope "region", or noRegion.
func regionAt(s *shared.Service) uint8 {
	if i := slices.Index(s.Scopes(), "region"); i >= 0 {
		return uint8(i)
	}
	return noRegion
}

// setLoads fills the priority-load fields of v, a service whose nodes start
// at map index nb: the aux trees follow its own tree, the rules follow them.
func setLoads(v *bpf.Service, s *shared.Service, nb uint32) {
	v.MinRank = uint8(s.MinRank())
	if !hasLoads(s) {
		return
	}
	l := layoutOf(s)
	aux := nb + l.NodeCount
	v.Of = uint16(s.OverprovisioningFactor())
	v.Panic = uint8(s.PanicThreshold())
	v.RegionAt = regionAt(s)
	v.AuxDelta = aux - l.AuxRoot[0]
	v.AuxRoot = [2]uint32{aux, aux + l.AuxCount[0]}
	v.Rules = aux + auxLen(s)
	if s.NetworkPriorities() {
		v.NetRule, v.OtherRoot, v.OtherDepth = 2, aux+l.AuxLen(), uint8(s.OtherWalkDepth())
		chain, stop := s.ClassWalk()
		v.First, v.ClassDepth = uint8(chain), uint8(stop)
	}
	v.RuleCount = uint8(len(s.Failover()))
	v.DistCount = uint8(len(s.Distribute()))
	if locLen(s) > 0 {
		v.Loc = v.Rules + uint32(len(s.Failover())) + distLen(s)
		if len(s.Distribute()) == 0 { // distribute: each rule block locates its own
			v.LocN = locN(s)
		}
		v.LocDepth = uint8(s.LocalityDepth())
	}
}

// distRecords are s's distribute rules as the kernel reads them
// (bpf/lib/distribute.h): per rule, then for a source no rule applies to, the
// precomputed priority of shared.Service.RuleLoads: the from prefix, the
// loads, panic and counts, and per target its span and effective weight
// in each set.
func distRecords(s *shared.Service) []byte {
	out := make([]byte, 0, int(distLen(s))*wire.NodeRecordSize)
	var at uint32 // the rule's locality records, from lt_service.loc
	for k := range len(s.Distribute()) + 1 {
		var n [2]uint32
		if s.LocalityDepth() > 0 {
			locs := distLocalities(s, k)
			n = [2]uint32{uint32(len(locs[0])), uint32(len(locs[1]))}
		}
		out = appendDistBlock(out, s.DistributeFrom(k), s.RuleLoads(k), at, n)
		at += n[0] + n[1]
	}
	return out
}

// appendDistBlock appends one rule's block of distStride node records; its
// locality records are n (per set) from offset at.
func appendDistBlock(out []byte, from []uint64, l *shared.Loads, at uint32, n [2]uint32) []byte {
	var seg [3]uint64
	copy(seg[:], from)
	flags := uint32(l.Healthy[0]) | uint32(l.Degraded[0])<<8
	if l.InPanic(0) {
		flags |= 1 << 16
	}
	if l.N > 0 {
		flags |= 1 << 24
	}
	c := l.Counts[0]
	out = appendNode(out, seg[0], uint32(len(from)), uint32(l.NTargets), flags, 0)
	out = appendNode(out, seg[1], c.Healthy, c.Degraded, c.Total, 0)
	out = appendNode(out, seg[2], at, n[0], n[1], 0)
	for i := range shared.MaxDistributeTargets {
		spans := l.TargetSpans(i)
		h, d := l.TargetWeights(i)
		for set, w := range []uint64{h, d, 0} {
			out = appendNode(out, w, spans[set].Lo, spans[set].Hi, 0, 0)
		}
	}
	return out
}

// appendNode appends one node record (docs/FORMAT.md "Node record").
func appendNode(out []byte, label uint64, lo, hi, firstChild, childCount uint32) []byte {
	out = binary.LittleEndian.AppendUint64(out, label)
	for _, v := range []uint32{lo, hi, firstChild, childCount} {
		out = binary.LittleEndian.AppendUint32(out, v)
	}
	return out
}
