package shared

import (
	"fmt"
	"math/bits"
	"testing"

	"github.com/loctree/loctree/shared/wire"
)

// BenchmarkChildSearch walks the leaves=N÷10 mesh of BenchmarkPick with the
// child searches measured for the walk, side by side: "records", the binary
// search over the node records every walker used before (format order, one
// 24-byte record per probe, a branch per probe); "compact", the same search
// branch-free over a separate array of the labels (eight to a cache line);
// "blocks", that array in blocks of eight under a list of block heads, each
// read whole by independent comparisons (a B-tree of two levels); and
// "hash", the (parent, label) → child table the walkers use now.
func BenchmarkChildSearch(b *testing.B) {
	for _, n := range benchSizes {
		tree, svc, locs, _ := benchTreeSubzones(b, n, max(4, n/180))
		labels := make([][]uint64, len(locs))
		for i, l := range locs {
			for _, sc := range svc.scopes {
				labels[i] = append(labels[i], Label(l[sc]))
			}
		}
		blocks := newLabelBlocks(tree.nodes)
		searches := []struct {
			name string
			find func(n uint32, rec []byte, want uint64) (uint32, bool)
		}{
			{"records", func(_ uint32, rec []byte, want uint64) (uint32, bool) { return searchRecords(tree.nodes, rec, want) }},
			{"compact", func(_ uint32, rec []byte, want uint64) (uint32, bool) { return blocks.compact(rec, want) }},
			{"blocks", blocks.child},
			{"hash", func(n uint32, _ []byte, want uint64) (uint32, bool) { return svc.child(setEligible, n, want) }},
		}
		for _, s := range searches {
			b.Run(fmt.Sprintf("%s/N=%d", s.name, n), func(b *testing.B) {
				i, deep := 0, 0
				for b.Loop() {
					if walkWith(tree.nodes, svc.lay.Root, labels[i%len(labels)], s.find) != svc.lay.Root {
						deep++
					}
					i++
				}
				if deep < i/2 {
					b.Fatalf("%d of %d walks left the root", deep, i)
				}
			})
		}
	}
}

// TestChildSearchCandidates holds the benchmark's candidates to the
// format's definition of a node's children.
func TestChildSearchCandidates(t *testing.T) {
	for _, subzones := range []int{1, 4, 8, 9, 17, 555} {
		top, _ := meshTopologySubzones(subzones*60, subzones)
		tree := mustBuild(t, top)
		blocks := newLabelBlocks(tree.nodes)
		for n := range uint32(tree.NumNodes()) {
			node, rec := nodeAt(tree.nodes, n), tree.nodes[int(n)*wire.NodeRecordSize:][:wire.NodeRecordSize]
			for c := node.FirstChild; c < node.FirstChild+node.ChildCount; c++ {
				l := nodeAt(tree.nodes, c).Label
				for _, want := range []uint64{l - 1, l, l + 1} {
					wantIdx, wantOK := scanChildren(tree.nodes, node, want)
					for name, got := range map[string][2]any{
						"records": pair(searchRecords(tree.nodes, rec, want)),
						"compact": pair(blocks.compact(rec, want)),
						"blocks":  pair(blocks.child(n, rec, want)),
					} {
						if got[1] != wantOK || (wantOK && got[0] != wantIdx) {
							t.Fatalf("%s, subzones=%d: child of %d labelled %#x: got %v, want %d %v", name, subzones, n, want, got, wantIdx, wantOK)
						}
					}
				}
			}
		}
	}
}

func pair(c uint32, ok bool) [2]any { return [2]any{c, ok} }

func walkWith(nodes []byte, root uint32, labels []uint64, find func(uint32, []byte, uint64) (uint32, bool)) uint32 {
	n := root
	for _, want := range labels {
		c, ok := find(n, nodes[int(n)*wire.NodeRecordSize:][:wire.NodeRecordSize], want)
		if !ok {
			break
		}
		n = c
	}
	return n
}

// searchRecords is the binary search over the node records.
func searchRecords(nodes, rec []byte, want uint64) (uint32, bool) {
	count := le.Uint32(rec[wire.NChildCount:])
	if count == 0 {
		return 0, false
	}
	base := le.Uint32(rec[wire.NFirstChild:])
	for count > 1 {
		half := count / 2
		if le.Uint64(nodes[int(base+half)*wire.NodeRecordSize:]) <= want {
			base += half
		}
		count -= half
	}
	return base, le.Uint64(nodes[int(base)*wire.NodeRecordSize:]) == want
}

// labelBlocks is the labels of all nodes in node order and, for every node
// with more than eight children, the first label of each further block of
// eight of them.
type labelBlocks struct {
	labels []uint64
	heads  []uint64
	headAt []uint32 // headAt[i]: where node i's children's heads start
}

func newLabelBlocks(nodes []byte) labelBlocks {
	n := uint32(len(nodes) / wire.NodeRecordSize)
	s := labelBlocks{labels: make([]uint64, n), headAt: make([]uint32, n)}
	for i := range n {
		s.labels[i] = nodeAt(nodes, i).Label
	}
	for i := range n {
		node := nodeAt(nodes, i)
		s.headAt[i] = uint32(len(s.heads))
		for b := node.FirstChild + 8; b < node.FirstChild+node.ChildCount; b += 8 {
			s.heads = append(s.heads, s.labels[b])
		}
	}
	return s
}

// compact is searchRecords over the label array, branch-free.
func (s *labelBlocks) compact(rec []byte, want uint64) (uint32, bool) {
	count := le.Uint32(rec[wire.NChildCount:])
	if count == 0 {
		return 0, false
	}
	base := le.Uint32(rec[wire.NFirstChild:])
	for count > 1 {
		half := count / 2
		base += half & atMost(s.labels[base+half], want)
		count -= half
	}
	return base, s.labels[base] == want
}

func (s *labelBlocks) child(n uint32, rec []byte, want uint64) (uint32, bool) {
	count := le.Uint32(rec[wire.NChildCount:])
	if count == 0 {
		return 0, false
	}
	first := le.Uint32(rec[wire.NFirstChild:])
	if count > 8 {
		skip := uint32(0)
		for _, h := range s.heads[s.headAt[n]:][:(count-1)/8] {
			skip += 8 & atMost(h, want)
		}
		first, count = first+skip, min(8, count-skip)
	}
	i := uint32(0)
	for _, l := range s.labels[first:][:count] {
		i += 1 & atMost(l, want)
	}
	if i == 0 {
		return 0, false
	}
	return first + i - 1, s.labels[first+i-1] == want
}

// atMost is all ones when v <= want and zero otherwise, without a branch
// (the compiler makes "if v <= want" a jump).
func atMost(v, want uint64) uint32 {
	_, borrow := bits.Sub64(want, v, 0)
	return uint32(borrow) - 1
}
