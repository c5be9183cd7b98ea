package shared

import "math/bits"

// siblings is an index over a node section, kept beside the records (it is
// not part of the encoded format): the labels of all nodes in node order,
// eight to a cache line, and for every node with more than blockSize
// children the first label of each further block of blockSize children.
// A child search then reads the short list of block heads (a few lines,
// shared by every search below that node) and one block of labels, instead
// of about log2(children) node records in as many cache lines.
type siblings struct {
	labels []uint64 // labels[i] is node i's label
	heads  []uint64 // block heads of the wide sibling groups, group by group
	headAt []uint32 // headAt[i]: where node i's children's heads start in heads
}

// blockSize is the number of labels one search reads linearly: 64 bytes.
const blockSize = 8

// newSiblings indexes a node section whose records Decode has checked.
func newSiblings(nodes []byte) siblings {
	n := len(nodes) / NodeRecordSize
	s := siblings{labels: make([]uint64, n), headAt: make([]uint32, n)}
	for i := range n {
		s.labels[i] = le.Uint64(nodes[i*NodeRecordSize+nLabel:])
	}
	for i := range n {
		rec := nodes[i*NodeRecordSize:]
		first, count := le.Uint32(rec[nFirstChild:]), le.Uint32(rec[nChildCount:])
		s.headAt[i] = uint32(len(s.heads))
		for b := first + blockSize; b < first+count; b += blockSize {
			s.heads = append(s.heads, s.labels[b])
		}
	}
	return s
}

// child finds the child of node n (record rec) labelled want.
func (s *siblings) child(n uint32, rec []byte, want uint64) (uint32, bool) {
	count := le.Uint32(rec[nChildCount:])
	if count == 0 {
		return 0, false
	}
	first := le.Uint32(rec[nFirstChild:])
	if count > blockSize {
		heads := s.heads[s.headAt[n]:][:(count-1)/blockSize]
		first += blockSize * uint32(countAtMost(heads, want))
		count = min(blockSize, count-(first-le.Uint32(rec[nFirstChild:])))
	}
	block := s.labels[first:][:count]
	i := countAtMost(block, want) - 1
	if i < 0 {
		return 0, false
	}
	return first + uint32(i), block[i] == want
}

// atMost is all ones when v <= want and zero otherwise, without a branch
// (the compiler turns "if v <= want" into a jump, which a source that
// changes every call mispredicts half the time).
func atMost(v, want uint64) int {
	_, borrow := bits.Sub64(want, v, 0)
	return int(borrow) - 1
}

// countAtMost is the number of sorted labels <= want, by a branch-free
// binary search.
func countAtMost(sorted []uint64, want uint64) int {
	if len(sorted) == 0 {
		return 0
	}
	base, n := 0, len(sorted)
	for n > 1 {
		half := n / 2
		base += half & atMost(sorted[base+half], want)
		n -= half
	}
	return base + 1&atMost(sorted[base], want)
}

// childCompact is the binary search of the node records run over the
// compact label array instead (the other candidate layout).
func (s *siblings) childCompact(rec []byte, want uint64) (uint32, bool) {
	count := le.Uint32(rec[nChildCount:])
	if count == 0 {
		return 0, false
	}
	base := le.Uint32(rec[nFirstChild:])
	labels := s.labels
	for count > 1 {
		half := count / 2
		base += half & uint32(atMost(labels[base+half], want))
		count -= half
	}
	return base, labels[base] == want
}
