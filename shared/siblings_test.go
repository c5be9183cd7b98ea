package shared

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestCountAtMost checks the branch-free search against a linear count.
func TestCountAtMost(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := range 40 {
		sorted := make([]uint64, n)
		for i := range sorted {
			sorted[i] = rng.Uint64N(100)
		}
		slices.Sort(sorted)
		for want := range uint64(101) {
			linear := 0
			for _, v := range sorted {
				if v <= want {
					linear++
				}
			}
			if got := countAtMost(sorted, want); got != linear {
				t.Fatalf("countAtMost(%v, %d) = %d, want %d", sorted, want, got, linear)
			}
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
		sib := &tree.sibs[0]
		for n := range uint32(tree.NumNodes()) {
			node := nodeAt(tree.nodes, n)
			rec := tree.nodes[int(n)*NodeRecordSize:][:NodeRecordSize]
			for c := node.FirstChild; c < node.FirstChild+node.ChildCount; c++ {
				l := nodeAt(tree.nodes, c).Label
				for _, want := range []uint64{l - 1, l, l + 1} {
					wantIdx, wantOK := scanChildren(tree.nodes, node, want)
					got, ok := sib.child(n, rec, want)
					if ok != wantOK || (ok && got != wantIdx) {
						t.Fatalf("subzones=%d node %d label %x: got %d %v, want %d %v", subzones, n, want, got, ok, wantIdx, wantOK)
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
// compact label array, and the block index (heads, then one 64-byte block).
func BenchmarkChildSearch(b *testing.B) {
	for _, n := range benchSizes {
		tree, svc, locs, _ := benchTreeSubzones(b, n, max(4, n/180))
		labels := make([][]uint64, len(locs))
		for i, l := range locs {
			for _, sc := range svc.Scopes {
				labels[i] = append(labels[i], Label(l[sc]))
			}
		}
		sib := &tree.sibs[0]
		searches := []struct {
			name string
			find func(n uint32, rec []byte, want uint64) (uint32, bool)
		}{
			{"records", func(_ uint32, rec []byte, want uint64) (uint32, bool) { return findChildRecords(tree.nodes, rec, want) }},
			{"records-branchfree", func(_ uint32, rec []byte, want uint64) (uint32, bool) {
				return findChildRecordsBF(tree.nodes, rec, want)
			}},
			{"compact", func(_ uint32, rec []byte, want uint64) (uint32, bool) { return sib.childCompact(rec, want) }},
			{"blocks", sib.child},
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
