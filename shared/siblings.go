package shared

import "math/bits"

// siblings is a child-search index kept beside a node section (it is not
// part of the encoded format): the labels of all nodes, in node order, in
// one array. A node's children are contiguous and sorted by label, so their
// labels are a sorted run of this array, eight to a 64-byte cache line where
// the records hold fewer than three; a search over a wide level touches a
// third of the lines. Measured against the search over the records and
// against blocks of eight labels under a list of block heads in
// docs/PERFORMANCE.md ("The child search").
type siblings struct {
	labels []uint64 // labels[i] is node i's label
}

// newSiblings indexes a node section whose records are final.
func newSiblings(nodes []byte) siblings {
	s := siblings{labels: make([]uint64, len(nodes)/NodeRecordSize)}
	for i := range s.labels {
		s.labels[i] = le.Uint64(nodes[i*NodeRecordSize+nLabel:])
	}
	return s
}

// child finds the child labelled want of the node whose record is rec, by a
// branch-free binary search over the children's labels.
func (s *siblings) child(rec []byte, want uint64) (uint32, bool) {
	count := le.Uint32(rec[nChildCount:])
	if count == 0 {
		return 0, false
	}
	base := le.Uint32(rec[nFirstChild:])
	labels := s.labels[base:][:count]
	at := uint32(0)
	for count > 1 {
		half := count / 2
		at += half & atMost(labels[at+half], want)
		count -= half
	}
	return base + at, labels[at] == want
}

// atMost is all ones when v <= want and zero otherwise, without a branch.
// The compiler turns "if v <= want { at += half }" into a jump, which a
// search for a source that changes from call to call mispredicts about
// every other step.
func atMost(v, want uint64) uint32 {
	_, borrow := bits.Sub64(want, v, 0)
	return uint32(borrow) - 1
}
