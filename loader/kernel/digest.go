package kernel

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"hash"

	"github.com/loctree/loctree/shared"
)

// digestCache remembers a service's records in the previous tree: equal
// bytes at the same indices have the same digest, which saves hashing the
// unchanged services of a big tree on every Apply.
type digestCache struct {
	root, epFirst uint32
	settings      [4]uint8
	affinity      uint32
	src, keys     [shared.MaxLevels]uint64
	nodes, eps    []byte
	loads         loadsKey
	aux           []byte
	digest        uint64
}

// loadsKey is what the kernel reads of a service's priority load besides
// the aux records.
type loadsKey struct {
	of, panic, minRank uint32
	auxRoot            [2]uint32
	rules              string
}

func loadsKeyOf(s *shared.Service) loadsKey {
	return loadsKey{of: s.OverprovisioningFactor(), panic: s.PanicThreshold(), minRank: uint32(s.MinRank()),
		auxRoot: layoutOf(s).AuxRoot, rules: string(ruleRecords(s))}
}

// cachedDigest is digest(t, p.svc, p.src), reusing the previous tree's value
// when the service's records are byte-identical at the same indices.
func (in *Installer) cachedDigest(t *shared.Tree, p *plan) uint64 {
	s := p.svc
	nodes, eps := records(t, s)
	c := digestCache{root: s.Root(), epFirst: s.FirstEndpoint(), src: p.src, keys: scopeKeys(s), nodes: nodes, eps: eps,
		settings: [4]uint8{uint8(s.Levels()), uint8(s.Mode()), uint8(s.Policy()), uint8(s.Health())}, affinity: s.AffinityTimeout(),
		loads: loadsKeyOf(s), aux: auxRecords(t, s)}
	if old, ok := in.digests[p.fe]; ok && old.root == c.root && old.epFirst == c.epFirst &&
		old.settings == c.settings && old.affinity == c.affinity && old.src == c.src && old.keys == c.keys && bytes.Equal(old.nodes, nodes) && bytes.Equal(old.eps, eps) &&
		old.loads == c.loads && bytes.Equal(old.aux, c.aux) {
		return old.digest
	}
	c.digest = digest(t, s, p.src)
	in.digests[p.fe] = c
	return c.digest
}

// digest identifies what the kernel sees of a service, independent of where
// the service sits in the tree: its settings (with the affinity timeout), scope keys, source labels, and its
// records with indices made relative to its own root and first endpoint.
// Equal digests mean the installed copy can stay.
func digest(t *shared.Tree, s *shared.Service, src [shared.MaxLevels]uint64) uint64 {
	h := sha256.New()
	var b [64]byte
	b[0], b[1], b[2], b[3] = byte(s.Levels()), byte(s.Mode()), byte(s.Policy()), byte(s.Health())
	h.Write(b[:4])
	if s.AffinityTimeout() != 0 { // only then: other services keep the digests installed before it existed
		h.Write(binary.LittleEndian.AppendUint32(b[:0], s.AffinityTimeout()))
	}
	if high, low, ok := s.LoadAware(); ok { // the band, and the name its counts are keyed by (widen.go)
		h.Write(binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint32(b[:0], high<<16|low), widenSvc(s)))
	}
	keys := scopeKeys(s)
	for _, l := range append(src[:], keys[:]...) {
		h.Write(binary.LittleEndian.AppendUint64(b[:0], l))
	}
	digestNodes(h, t.Node, s.Root(), layoutOf(s).NodeCount, s.FirstEndpoint(), nil)
	_, eps := records(t, s)
	h.Write(eps) // endpoint records hold no indices
	digestLoads(h, t, s)
	digestNetwork(h, t, s)
	return binary.LittleEndian.Uint64(h.Sum(b[:0]))
}

// digestLoads adds what the kernel reads of a service's priority load: its
// settings, failover rules and aux records, their indices relative to the
// first aux node and the first endpoint.
func digestLoads(h hash.Hash, t *shared.Tree, s *shared.Service) {
	var b [24]byte
	b[0], b[1], b[2] = byte(s.OverprovisioningFactor()), byte(s.OverprovisioningFactor()>>8), byte(s.PanicThreshold())
	b[3] = byte(s.MinRank())
	h.Write(b[:4])
	h.Write(ruleRecords(s))
	if !hasLoads(s) {
		return
	}
	l := layoutOf(s)
	digestNodes(h, t.AuxNode, l.AuxRoot[0], auxLen(s), l.EpFirst, binary.LittleEndian.AppendUint32(nil, l.AuxCount[0]))
}

// digestNodes writes into h the count node records from root (node reads
// one: Tree.Node or Tree.AuxNode), their indices relative to root and to
// the service's first endpoint epFirst, each record followed by tail.
func digestNodes(h hash.Hash, node func(uint32) shared.Node, root, count, epFirst uint32, tail []byte) {
	var b [32]byte
	le := binary.LittleEndian
	for i := root; i < root+count; i++ {
		n := node(i)
		fc := n.FirstChild
		if n.ChildCount > 0 {
			fc -= root
		}
		rec := le.AppendUint64(b[:0], n.Label)
		rec = le.AppendUint32(le.AppendUint32(rec, n.Lo-epFirst), n.Hi-epFirst)
		rec = le.AppendUint32(le.AppendUint32(rec, fc), n.ChildCount)
		h.Write(append(rec, tail...))
	}
}
