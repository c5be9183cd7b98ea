package shared

import (
	"fmt"
	"testing"
)

// TestAtMost checks the branch-free comparison at the edges of uint64.
func TestAtMost(t *testing.T) {
	const top = ^uint64(0)
	for _, c := range []struct{ v, want uint64 }{{0, 0}, {0, 1}, {1, 0}, {top, top}, {top - 1, top}, {top, top - 1}, {0, top}, {top, 0}, {1 << 63, 1<<63 - 1}, {1<<63 - 1, 1 << 63}} {
		want := uint32(0)
		if c.v <= c.want {
			want = ^uint32(0)
		}
		if got := atMost(c.v, c.want); got != want {
			t.Errorf("atMost(%#x, %#x) = %#x, want %#x", c.v, c.want, got, want)
		}
	}
}

// TestSiblingsFindEveryChild searches every node's children, and labels
// next to theirs, in trees whose groups are narrower and wider than a block
// (4 to 555 subzones per zone), and compares with a scan of the records.
func TestSiblingsFindEveryChild(t *testing.T) {
	for _, subzones := range []int{4, 7, 8, 9, 16, 17, 100, 555} {
		top, _ := meshTopologySubzones(subzones*60, subzones)
		tree, err := Build(top, BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sib, blocks := &tree.sibs[0], newBlocks(tree.nodes)
		for n := range uint32(tree.NumNodes()) {
			node := nodeAt(tree.nodes, n)
			rec := tree.nodes[int(n)*NodeRecordSize:][:NodeRecordSize]
			for c := node.FirstChild; c < node.FirstChild+node.ChildCount; c++ {
				l := nodeAt(tree.nodes, c).Label
				for _, want := range []uint64{l - 1, l, l + 1} {
					wantIdx, wantOK := scanChildren(tree.nodes, node, want)
					got, ok := sib.child(rec, want)
					if ok != wantOK || (ok && got != wantIdx) {
						t.Fatalf("subzones=%d node %d label %x: got %d %v, want %d %v", subzones, n, want, got, ok, wantIdx, wantOK)
					}
					if got, ok := blocks.child(n, rec, want); ok != wantOK || (ok && got != wantIdx) {
						t.Fatalf("blocks: subzones=%d node %d label %x: got %d %v, want %d %v", subzones, n, want, got, ok, wantIdx, wantOK)
					}
				}
			}
		}
	}
}

// scanChildren reads docs/FORMAT.md's definition: the children are the
// records [first_child, first_child + child_count).
func scanChildren(nodes []byte, parent Node, want uint64) (uint32, bool) {
	for c := parent.FirstChild; c < parent.FirstChild+parent.ChildCount; c++ {
		if nodeAt(nodes, c).Label == want {
			return c, true
		}
	}
	return 0, false
}

// BenchmarkChildSearch compares the walk of BenchmarkPick's growing mesh
// (leaves = N÷10) with three child searches: binary search over the node
// records (format order, one record per probe), the same search over the
// compact label array (the one the walks use), and blocks of eight labels
// under a list of block heads.
func BenchmarkChildSearch(b *testing.B) {
	for _, n := range benchSizes {
		tree, svc, locs, _ := benchTreeSubzones(b, n, max(4, n/180))
		labels := make([][]uint64, len(locs))
		for i, l := range locs {
			for _, sc := range svc.Scopes {
				labels[i] = append(labels[i], Label(l[sc]))
			}
		}
		sib, blocks := &tree.sibs[0], newBlocks(tree.nodes)
		searches := []struct {
			name string
			find func(n uint32, rec []byte, want uint64) (uint32, bool)
		}{
			{"records", func(_ uint32, rec []byte, want uint64) (uint32, bool) { return findChildRecords(tree.nodes, rec, want) }},
			{"records-branchfree", func(_ uint32, rec []byte, want uint64) (uint32, bool) {
				return findChildRecordsBF(tree.nodes, rec, want)
			}},
			{"compact", func(_ uint32, rec []byte, want uint64) (uint32, bool) { return sib.child(rec, want) }},
			{"blocks", blocks.child},
		}
		for _, s := range searches {
			b.Run(fmt.Sprintf("%s/N=%d", s.name, n), func(b *testing.B) {
				i, deep := 0, 0
				for b.Loop() {
					if walkWith(tree.nodes, svc.Root, labels[i%len(labels)], s.find) != svc.Root {
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

func walkWith(nodes []byte, root uint32, labels []uint64, find func(uint32, []byte, uint64) (uint32, bool)) uint32 {
	n := root
	for _, want := range labels {
		c, ok := find(n, nodes[int(n)*NodeRecordSize:][:NodeRecordSize], want)
		if !ok {
			break
		}
		n = c
	}
	return n
}

// findChildRecords is the binary search over node records the walks used
// before the block index, kept to measure against.
func findChildRecords(nodes, rec []byte, want uint64) (uint32, bool) {
	count := le.Uint32(rec[nChildCount:])
	if count == 0 {
		return 0, false
	}
	base := le.Uint32(rec[nFirstChild:])
	for count > 1 {
		half := count / 2
		if le.Uint64(nodes[int(base+half)*NodeRecordSize:]) <= want {
			base += half
		}
		count -= half
	}
	return base, le.Uint64(nodes[int(base)*NodeRecordSize:]) == want
}

func findChildRecordsBF(nodes, rec []byte, want uint64) (uint32, bool) {
	count := le.Uint32(rec[nChildCount:])
	if count == 0 {
		return 0, false
	}
	base := le.Uint32(rec[nFirstChild:])
	for count > 1 {
		half := count / 2
		base += half & uint32(atMost(le.Uint64(nodes[int(base+half)*NodeRecordSize:]), want))
		count -= half
	}
	return base, le.Uint64(nodes[int(base)*NodeRecordSize:]) == want
}

// blocks is the candidate layout not taken: for every node with more than
// eight children, the first label of each further block of eight; a search
// finds the block among the heads, then the label in the block.
type blocks struct {
	siblings
	heads  []uint64
	headAt []uint32 // headAt[i]: where node i's children's heads start
}

func newBlocks(nodes []byte) blocks {
	s := blocks{siblings: newSiblings(nodes), headAt: make([]uint32, len(nodes)/NodeRecordSize)}
	for i := range s.headAt {
		n := nodeAt(nodes, uint32(i))
		s.headAt[i] = uint32(len(s.heads))
		for b := n.FirstChild + 8; b < n.FirstChild+n.ChildCount; b += 8 {
			s.heads = append(s.heads, s.labels[b])
		}
	}
	return s
}

func (s *blocks) child(n uint32, rec []byte, want uint64) (uint32, bool) {
	count := le.Uint32(rec[nChildCount:])
	if count == 0 {
		return 0, false
	}
	first := le.Uint32(rec[nFirstChild:])
	if count > 8 {
		heads := s.heads[s.headAt[n]:][:(count-1)/8]
		skip := 8 * countAtMost(heads, want)
		first, count = first+skip, min(8, count-skip)
	}
	block := s.labels[first:][:count]
	i := countAtMost(block, want)
	if i == 0 {
		return 0, false
	}
	return first + i - 1, block[i-1] == want
}

// countAtMost is the number of sorted labels <= want, branch-free.
func countAtMost(sorted []uint64, want uint64) uint32 {
	if len(sorted) == 0 {
		return 0
	}
	base, n := uint32(0), uint32(len(sorted))
	for n > 1 {
		half := n / 2
		base += half & atMost(sorted[base+half], want)
		n -= half
	}
	return base + 1&atMost(sorted[base], want)
}
