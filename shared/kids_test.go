package shared

import (
	"fmt"
	"testing"
)

// TestChildrenFindEveryChild asks every node of every tree (eligible and
// aux, of every service, built whole and placed by the Builder) for each
// child's label, for the labels next to it and for the empty value, and
// compares with docs/FORMAT.md's definition of a node's children: the
// records [first_child, first_child + child_count).
func TestChildrenFindEveryChild(t *testing.T) {
	var trees []*Tree
	for _, subzones := range []int{1, 4, 9, 100, 555} {
		top, _ := meshTopologySubzones(subzones*60, subzones)
		trees = append(trees, mustBuild(t, top))
	}
	spill, _ := spillMesh(3000, true)
	trees = append(trees, mustBuild(t, spill))
	var b Builder
	for i := range 3 { // placed at non-zero node and aux bases
		spec := spill.Services[0]
		spec.Name = fmt.Sprintf("svc-%d", i)
		placed, err := b.Update([]ServiceSpec{spec}, nil, uint64(i+1))
		if err != nil {
			t.Fatal(err)
		}
		trees = append(trees, placed)
	}
	for ti, tree := range trees {
		for _, s := range tree.Services() {
			checkChildren(t, fmt.Sprintf("tree %d %s", ti, s.name), s, setEligible, s.lay.Root, s.lay.NodeCount)
			checkChildren(t, fmt.Sprintf("tree %d %s aux", ti, s.name), s, setDegraded, s.lay.AuxRoot[0], s.lay.AuxCount[0]+s.lay.AuxCount[1])
		}
	}
}

func checkChildren(t *testing.T, name string, s *Service, set int, first, count uint32) {
	t.Helper()
	nodes := s.nodesOf(set)
	for n := first; n < first+count; n++ {
		node := nodeAt(nodes, n)
		wants := []uint64{emptyLabel, 0}
		for c := node.FirstChild; c < node.FirstChild+node.ChildCount; c++ {
			l := nodeAt(nodes, c).Label
			wants = append(wants, l-1, l, l+1)
		}
		for _, want := range wants {
			wantIdx, wantOK := scanChildren(nodes, node, want)
			if got, ok := s.child(set, n, want); ok != wantOK || (ok && got != wantIdx) {
				t.Fatalf("%s: child of node %d labelled %#x: got %d %v, want %d %v", name, n, want, got, ok, wantIdx, wantOK)
			}
		}
	}
}

func mustBuild(t *testing.T, top *Topology) *Tree {
	t.Helper()
	tree, err := Build(top, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

func scanChildren(nodes []byte, parent Node, want uint64) (uint32, bool) {
	for c := parent.FirstChild; c < parent.FirstChild+parent.ChildCount; c++ {
		if nodeAt(nodes, c).Label == want {
			return c, true
		}
	}
	return 0, false
}
