package shared

import "github.com/loctree/loctree/shared/wire"

// kids is a service's child index (the kernel's is loader/kernel/kids.go), kept beside its node records (it is
// not part of the encoded format): an open-addressing hash table from
// (parent, label) to the child, with node indices relative to the tree's
// first node so that the Builder places a service anywhere without
// rebuilding it. A walk then reads one slot per level, about one cache line,
// where a binary search over the sorted children reads about log2(children)
// records, each a branch a changing source mispredicts every other time
// (docs/PERFORMANCE.md, "The child search").
type kids struct {
	slots []kidSlot // a power of two, at most half full
}

type kidSlot struct {
	label         uint64
	parent, child uint32 // relative indices; parent noParent: empty slot
}

const noParent = ^uint32(0)

// newKids indexes the count node records of one service's trees in
// nodes, from index base, whose links Decode has checked.
func newKids(nodes []byte, base, count uint32) kids {
	size := 1
	for size < 2*int(count) {
		size *= 2
	}
	c := kids{slots: make([]kidSlot, size)}
	for i := range c.slots {
		c.slots[i].parent = noParent
	}
	for p := range count {
		rec := nodes[int(base+p)*wire.NodeRecordSize:][:wire.NodeRecordSize]
		first := le.Uint32(rec[wire.NFirstChild:]) - base
		for k := first; k < first+le.Uint32(rec[wire.NChildCount:]); k++ {
			c.put(kidSlot{le.Uint64(nodes[int(base+k)*wire.NodeRecordSize+wire.NLabel:]), p, k})
		}
	}
	return c
}

func (c *kids) put(s kidSlot) {
	mask := uint64(len(c.slots) - 1)
	i := slotOf(s.parent, s.label) & mask
	for c.slots[i].parent != noParent {
		i = (i + 1) & mask
	}
	c.slots[i] = s
}

// child is the child labelled want of node parent (relative indices).
func (c *kids) child(parent uint32, want uint64) (uint32, bool) {
	if len(c.slots) == 0 {
		return 0, false // a Service not decoded from a tree
	}
	mask := uint64(len(c.slots) - 1)
	for i := slotOf(parent, want) & mask; ; i = (i + 1) & mask {
		s := &c.slots[i]
		if s.label == want && s.parent == parent {
			return s.child, true
		}
		if s.parent == noParent {
			return 0, false
		}
	}
}

// slotOf mixes a parent and a label (an FNV-1a hash, weak in its low bits)
// into a slot number.
func slotOf(parent uint32, label uint64) uint64 {
	return (label ^ uint64(parent)*0x9e3779b97f4a7c15) * 0xff51afd7ed558ccd >> 20
}
