package loader

import (
	"encoding/binary"
	"fmt"

	"github.com/loctree/loctree/shared"
)

// The child table's constants, as bpf/loctree.h defines them
// (TestKidConstantsMatchHeader compares them).
const (
	kidProbes = 16                 // LT_KID_PROBES: slots a search reads at most
	kidEmpty  = ^uint32(0)         // LT_KID_EMPTY: lt_kid.first of a free slot
	kidMix    = 0xff51afd7ed558ccd // LT_KID_MIX
)

// kidGrowths is how many sizes kidTable tries for a table whose keys do
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
	trees := []kidTree{{0, s.NodeCount, s.Root}}
	switch {
	case hasLoads(s):
		trees = append(trees, kidTree{s.NodeCount, s.NodeCount + s.AuxCount[0] + s.AuxCount[1], s.AuxRoot[0] - s.NodeCount})
	case s.NetworkRule:
		trees = append(trees, kidTree{s.NodeCount, s.NodeCount + s.NetCount, s.Root})
	}
	return trees
}

// kidEdges lists every (parent, label) → child of the trees in region,
// node records as the kernel reads them.
func kidEdges(region []byte, trees []kidTree) ([]kidKey, error) {
	n := uint32(len(region) / shared.NodeRecordSize)
	var out []kidKey
	for _, t := range trees {
		for p := t.from; p < t.to; p++ {
			rec := region[int(p)*shared.NodeRecordSize:]
			count := binary.LittleEndian.Uint32(rec[20:])
			if count == 0 {
				continue
			}
			first := binary.LittleEndian.Uint32(rec[16:]) - t.base
			if first < t.from || first >= t.to || count > t.to-first || t.to > n {
				return nil, fmt.Errorf("child table: children [%d, +%d) of node %d leave their tree [%d, %d)", first, count, p, t.from, t.to)
			}
			for k := first; k < first+count; k++ {
				out = append(out, kidOf(region[int(k)*shared.NodeRecordSize:], t.base, first, k))
			}
		}
	}
	return out, nil
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

// kids is a service's child table as the kernel reads it, as node
// records: slots home slots, then as many as the keys placed past the last
// home slot need, and one free slot after the last key, so a search for a
// missing key stops at a free slot inside the table.
type kids struct {
	slots   uint32
	records []byte
}

// len is the node map entries the table takes.
func (k kids) len() uint32 { return uint32(len(k.records) / shared.NodeRecordSize) }

// kidTable lays out keys for the kernel: open addressing with linear
// probing, Robin Hood insertion, 2 home slots per key (grown by half up to
// kidGrowths times until every key sits within kidProbes slots of its
// home). No keys: no table. The error says no size held them.
func kidTable(keys []kidKey) (kids, error) {
	if len(keys) == 0 {
		return kids{}, nil
	}
	slots := uint32(2 * len(keys))
	for range kidGrowths {
		if table, ok := placeKids(keys, slots); ok {
			return kids{slots, encodeKids(trimKids(table, slots))}, nil
		}
		slots += slots / 2
	}
	return kids{}, fmt.Errorf("child table: %d keys do not fit within %d probes of their home slots in up to %d slots", len(keys), kidProbes, slots)
}

// placedKid is a key in a slot and its distance from its home slot.
type placedKid struct {
	kidKey
	used bool
	dist uint32
}

// placeKids places keys in slots home slots and up to kidProbes - 1 slots
// after them, Robin Hood: a key moving on takes the place of one nearer its
// home, so no key sits after a free slot on the way from its home. It fails
// when a key would sit kidProbes or more slots past its home.
func placeKids(keys []kidKey, slots uint32) ([]placedKid, bool) {
	table := make([]placedKid, slots+kidProbes)
	for _, key := range keys {
		cur := placedKid{kidKey: key, used: true}
		for i := kidHome(key.first, key.label, slots); ; i++ {
			if cur.dist >= kidProbes || i >= uint32(len(table))-1 {
				return nil, false
			}
			if !table[i].used {
				table[i] = cur
				break
			}
			if table[i].dist < cur.dist {
				table[i], cur = cur, table[i]
			}
			cur.dist++
		}
	}
	return table, true
}

// trimKids cuts table after the free slot that follows its last key, and
// not before its slots home slots.
func trimKids(table []placedKid, slots uint32) []placedKid {
	last := len(table) - 1
	for last >= 0 && !table[last].used {
		last--
	}
	return table[:max(int(slots), last+2)]
}

// encodeKids writes the slots as struct lt_kid records.
func encodeKids(table []placedKid) []byte {
	out := make([]byte, 0, len(table)*shared.NodeRecordSize)
	for _, s := range table {
		first := kidEmpty
		if s.used {
			first = s.first
		}
		out = binary.LittleEndian.AppendUint64(out, s.label)
		out = binary.LittleEndian.AppendUint32(out, first)
		out = binary.LittleEndian.AppendUint32(out, s.child)
		out = binary.LittleEndian.AppendUint32(out, s.childFirst)
		out = binary.LittleEndian.AppendUint32(out, s.childCount)
	}
	return out
}

// kidsOf builds the child table of s, whose node region holds region (its
// records as write lays them out).
func kidsOf(s *shared.Service, region []byte) (kids, error) {
	keys, err := kidEdges(region, kidTrees(s))
	if err == nil {
		var k kids
		if k, err = kidTable(keys); err == nil {
			return k, nil
		}
	}
	return kids{}, fmt.Errorf("service %s: %w", s.Name, err)
}
