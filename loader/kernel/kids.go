package kernel

import (
	"encoding/binary"
	"fmt"

	"github.com/loctree/loctree/shared"
	"github.com/loctree/loctree/shared/wire"
)

// The child table's constants, as bpf/lib/kids.h defines them
// (TestKidConstantsMatchHeader compares them).
const (
	kidProbes = 16                 // LT_KID_PROBES: slots a search reads at most
	kidEmpty  = ^uint32(0)         // LT_KID_EMPTY: lt_kid.first of a free slot
	kidMix    = 0xff51afd7ed558ccd // LT_KID_MIX
)

// kidGrowths is how many sizes appendKids tries for a table whose keys do
// not all fit within kidProbes slots of their home. At 2 slots per key a
// Robin Hood table's longest probe was 10 slots for 100,000 random keys
// (TestKidTableProbes), so the first size nearly always holds and a ninth
// (25 slots per key) failing means the hash is broken.
const kidGrowths = 8

// kidHome is the home slot of (first, label) in a table of slots home
// slots, as lt_kid_home computes it.
func kidHome(first uint32, label uint64, slots uint32) uint32 {
	h := (label ^ uint64(first)) * kidMix
	return uint32((h >> 32) * uint64(slots) >> 32)
}

// kidKey is one (parent, label) → child of a service's trees: the parent
// named by its first child, and the child with its own children (their
// first, and their number), which the walk goes on with. Indices are
// relative to the service's node region.
type kidKey struct {
	label                  uint64
	first, child           uint32
	childFirst, childCount uint32
}

// kidTree is one tree in a service's node region: its records are
// [from, to) (relative to the region) and a record's first_child minus base
// is its first child's index relative to the region.
type kidTree struct{ from, to, base uint32 }

// kidTrees are the trees the kernel walks in s's node region (laid out by
// Installer.write): its own tree, then either its degraded and unhealthy
// trees (a priority load; their first_child indices are the aux section's)
// or its network tree (rebased to the node section by netRecords).
func kidTrees(s *shared.Service) []kidTree {
	l := layoutOf(s)
	trees := []kidTree{{0, l.NodeCount, l.Root}}
	switch {
	case hasLoads(s):
		trees = append(trees, kidTree{l.NodeCount, l.NodeCount + auxLen(s), l.AuxRoot[0] - l.NodeCount})
	case s.NetworkRule():
		trees = append(trees, kidTree{l.NodeCount, l.NodeCount + l.NetCount, l.Root})
	}
	return trees
}

// kidCount checks the child links of the trees in region and returns the
// number of (parent, label) keys they make.
func kidCount(region []byte, trees []kidTree) (uint32, error) {
	n, keys := uint32(len(region)/wire.NodeRecordSize), uint32(0)
	for _, t := range trees {
		for p := t.from; p < t.to; p++ {
			rec := region[int(p)*wire.NodeRecordSize:]
			count := binary.LittleEndian.Uint32(rec[20:])
			if count == 0 {
				continue
			}
			first := binary.LittleEndian.Uint32(rec[16:]) - t.base
			if first < t.from || first >= t.to || count > t.to-first || t.to > n {
				return 0, fmt.Errorf("child table: children [%d, +%d) of node %d leave their tree [%d, %d)", first, count, p, t.from, t.to)
			}
			keys += count
		}
	}
	return keys, nil
}

// eachKid calls put with every (parent, label) → child of the trees in
// region (checked by kidCount) until it returns false.
func eachKid(region []byte, trees []kidTree, put func(kidKey) bool) bool {
	for _, t := range trees {
		for p := t.from; p < t.to; p++ {
			rec := region[int(p)*wire.NodeRecordSize:]
			count := binary.LittleEndian.Uint32(rec[20:])
			first := binary.LittleEndian.Uint32(rec[16:]) - t.base
			for k := first; count > 0 && k < first+count; k++ {
				if !put(kidOf(region[int(k)*wire.NodeRecordSize:], t.base, first, k)) {
					return false
				}
			}
		}
	}
	return true
}

// kidOf is the key of child k, whose record is rec, of the parent whose
// first child is first.
func kidOf(rec []byte, base, first, k uint32) kidKey {
	key := kidKey{label: binary.LittleEndian.Uint64(rec), first: first, child: k}
	if key.childCount = binary.LittleEndian.Uint32(rec[20:]); key.childCount > 0 {
		key.childFirst = binary.LittleEndian.Uint32(rec[16:]) - base
	}
	return key
}

// kidTable is a child table as the kernel reads it, struct lt_kid records:
// home slots, then as many as the keys placed past the last home slot
// need, and one free slot after the last key, so a search for a missing
// key stops at a free slot inside the table.
type kidTable []byte

func (t kidTable) len() uint32 { return uint32(len(t) / wire.NodeRecordSize) }

func (t kidTable) at(i uint32) kidKey {
	r := t[int(i)*wire.NodeRecordSize:][:wire.NodeRecordSize]
	le := binary.LittleEndian
	return kidKey{le.Uint64(r), le.Uint32(r[8:]), le.Uint32(r[12:]), le.Uint32(r[16:]), le.Uint32(r[20:])}
}

// kidSlots are a table's slots while keys are placed in it.
type kidSlots []kidKey

// reset makes *t a table of slots home slots and the kidProbes slots
// after them, all free, reusing its memory.
func (t *kidSlots) reset(slots uint32) {
	*t = append((*t)[:0], make(kidSlots, slots+kidProbes)...)
	for i := range *t {
		(*t)[i].first = kidEmpty
	}
}

// insert places k in a table of slots home slots, Robin Hood: a key moving
// on takes the place of one nearer its home, so no key sits after a free
// slot on the way from its home. It fails when a key would sit kidProbes
// or more slots past its home, or in the table's last slot.
func (t kidSlots) insert(k kidKey, slots uint32) bool {
	dist := uint32(0)
	for i := kidHome(k.first, k.label, slots); ; i++ {
		if dist >= kidProbes || int(i)+1 >= len(t) {
			return false
		}
		s := &t[i]
		if s.first == kidEmpty {
			*s = k
			return true
		}
		if d := i - kidHome(s.first, s.label, slots); d < dist {
			*s, k, dist = k, *s, d
		}
		dist++
	}
}

// appendTo appends the table's records to out, cut after the free slot
// that follows its last key and not before its slots home slots.
func (t kidSlots) appendTo(out []byte, slots uint32) []byte {
	last := len(t) - 1
	for last >= 0 && t[last].first == kidEmpty {
		last--
	}
	le := binary.LittleEndian
	for _, k := range t[:max(int(slots), last+2)] {
		out = le.AppendUint64(out, k.label)
		out = le.AppendUint32(le.AppendUint32(le.AppendUint32(le.AppendUint32(out, k.first), k.child), k.childFirst), k.childCount)
	}
	return out
}

// appendKids appends the child table of the trees in region to it:
// open addressing with linear probing, Robin Hood insertion, 2 home slots
// per key, grown by half up to kidGrowths times until every key sits within
// kidProbes slots of its home, placed in t (scratch space, reused). It
// returns the region and the table's home slots; no keys, no table.
func appendKids(region []byte, trees []kidTree, t *kidSlots) ([]byte, uint32, error) {
	keys, err := kidCount(region, trees)
	if err != nil || keys == 0 {
		return region, 0, err
	}
	slots := 2 * keys
	for range kidGrowths {
		t.reset(slots)
		if eachKid(region, trees, func(k kidKey) bool { return t.insert(k, slots) }) {
			return t.appendTo(region, slots), slots, nil
		}
		slots += slots / 2
	}
	return region, 0, fmt.Errorf("child table: %d keys do not fit within %d probes of their home slots in up to %d slots", keys, kidProbes, slots)
}

// kidLen is an upper bound of the node map entries s's child table takes
// at its first size: its keys (every node but a tree's root is one) twice,
// and the slots past the last home slot.
func kidLen(s *shared.Service) uint32 {
	nodes, trees := uint32(0), uint32(0)
	for _, t := range kidTrees(s) {
		nodes, trees = nodes+t.to-t.from, trees+1
	}
	return 2*(nodes-min(nodes, trees)) + kidProbes
}
