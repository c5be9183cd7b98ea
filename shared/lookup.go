package shared

import "github.com/loctree/loctree/shared/wire"

// Range is the answer of a lookup: the candidate endpoints [Lo, Hi) (absolute
// endpoint indices), how many scopes matched, and the tree node they hang from.
// An empty range means no candidate.
type Range struct {
	Lo, Hi uint32
	Depth  int
	Node   uint32
}

// Len is the number of candidates.
func (r Range) Len() int { return int(r.Hi - r.Lo) }

// Lookup finds the candidate range for a source locality. It reads the
// source's value of each scope (missing = ""), does not allocate, and applies
// the service's mode: in strict mode a partial match gives an empty range.
func (s *Service) Lookup(src Locality) Range {
	var labels [MaxLevels]uint64
	for i, sc := range s.scopes {
		labels[i] = Label(src[sc])
	}
	if r := s.lookupTree(labels[:len(s.scopes)]); !s.networkMiss(r) {
		return r
	}
	return s.lookupNetwork(labels[:len(s.scopes)])
}

// emptyLabel is Label("").
var emptyLabel = Label("")

// LookupLabels is Lookup with the source's scope values already hashed:
// labels[i] = Label(value of Scopes[i]). Missing trailing labels are "".
func (s *Service) LookupLabels(labels []uint64) Range {
	if r := s.lookupTree(labels); !s.networkMiss(r) {
		return r
	}
	return s.lookupNetwork(labels)
}

// networkMiss reports whether the walk r of the service's tree found no
// eligible endpoint on the source's network where the network rule applies
// (the root has children, none for the source's network).
func (s *Service) networkMiss(r Range) bool { return r.Depth == 0 && s.networkRule && r.Lo < r.Hi }

// lookupTree walks the service's tree, a level a probe of its child table.
// A function of its own, so that the compiler keeps the walk in registers.
func (s *Service) lookupTree(labels []uint64) Range {
	n := uint32(0) // relative to s.Root
	depth := 0
	for ; depth < len(s.scopes); depth++ {
		want := emptyLabel
		if depth < len(labels) {
			want = labels[depth]
		}
		c, ok := s.kids[0].child(n, want)
		if !ok {
			break
		}
		n = c
	}
	n += s.lay.Root
	rec := s.tree.nodes[int(n)*wire.NodeRecordSize:][:wire.NodeRecordSize]
	r := Range{Lo: le.Uint32(rec[wire.NLo:]), Hi: le.Uint32(rec[wire.NHi:]), Depth: depth, Node: n}
	if (s.mode == ModeStrict && depth < len(s.scopes)) || depth < s.minRank {
		r.Hi = r.Lo
	}
	return r
}

// walk goes down the tree of levels levels from root, one label a level,
// until a label is missing, and returns the deepest node's range.
func walk(nodes []byte, root uint32, labels []uint64, levels int) Range {
	n := root
	rec := nodes[int(n)*wire.NodeRecordSize:][:wire.NodeRecordSize]
	depth := 0
	for ; depth < levels; depth++ {
		want := emptyLabel
		if depth < len(labels) {
			want = labels[depth]
		}
		count := le.Uint32(rec[wire.NChildCount:])
		if count == 0 {
			break
		}
		// Branch-free binary search: base ends on the last child whose
		// label is <= want (sources are unpredictable, branches are not).
		base := le.Uint32(rec[wire.NFirstChild:])
		for count > 1 {
			half := count / 2
			if le.Uint64(nodes[int(base+half)*wire.NodeRecordSize:]) <= want {
				base += half
			}
			count -= half
		}
		rec = nodes[int(base)*wire.NodeRecordSize:][:wire.NodeRecordSize]
		if le.Uint64(rec[wire.NLabel:]) != want {
			rec = nodes[int(n)*wire.NodeRecordSize:][:wire.NodeRecordSize]
			break
		}
		n = base
	}
	return Range{Lo: le.Uint32(rec[wire.NLo:]), Hi: le.Uint32(rec[wire.NHi:]), Depth: depth, Node: n}
}

// Source is a source locality prepared for many lookups: every value is hashed
// once, so a lookup only reads labels and walks the tree. Data planes keep one
// Source per client locality (a proxy's own, a node's).
//
// The labels of the well-known scope keys sit at fixed positions in the one
// cache line of the Source, so a lookup neither compares key strings nor
// follows pointers for them; only other keys (any label key a service may
// route on) are matched by name.
type Source struct {
	known [len(wellKnownScopes)]uint64 // Label of each well-known key's value ("" if missing)
	other *sourceKeys                  // the other keys; nil when there are none
}

type sourceKeys struct {
	keys   []string
	labels []uint64
}

// wellKnownScopes are the scope keys a Source keeps by position.
var wellKnownScopes = [...]string{"network", "cluster", "region", "zone", "subzone", "node"}

// wellKnownScope is the position of key in wellKnownScopes, or -1.
func wellKnownScope(key string) int {
	for i, k := range wellKnownScopes {
		if k == key {
			return i
		}
	}
	return -1
}

// NewSource prepares a locality for LookupSource.
func NewSource(loc Locality) *Source {
	s := &Source{}
	for i := range s.known {
		s.known[i] = emptyLabel
	}
	for k, v := range loc {
		if i := wellKnownScope(k); i >= 0 {
			s.known[i] = Label(v)
			continue
		}
		if s.other == nil {
			s.other = &sourceKeys{}
		}
		s.other.keys = append(s.other.keys, k)
		s.other.labels = append(s.other.labels, Label(v))
	}
	return s
}

// label returns the label of the source's value of scope key ("" if missing).
func (src *Source) label(key string) uint64 {
	if i := wellKnownScope(key); i >= 0 {
		return src.known[i]
	}
	if src.other != nil {
		for i, k := range src.other.keys {
			if k == key {
				return src.other.labels[i]
			}
		}
	}
	return emptyLabel
}

// scopeSlots are, per scope of a service, 1 + the position of its key in
// wellKnownScopes, or 0 for another key.
type scopeSlots [MaxLevels]uint8

func newScopeSlots(scopes []string) scopeSlots {
	var ss scopeSlots
	for i, sc := range scopes {
		ss[i] = uint8(wellKnownScope(sc) + 1)
	}
	return ss
}

// sourceLabels fills labels[:len(s.Scopes)] with the source's labels of the
// service's scopes.
func (s *Service) sourceLabels(src *Source, labels *[MaxLevels]uint64) {
	for i, sc := range s.scopes {
		if k := s.slots[i]; k != 0 {
			labels[i] = src.known[k-1]
		} else {
			labels[i] = src.label(sc)
		}
	}
}

// LookupSource is Lookup with a prepared source. It does not allocate.
func (s *Service) LookupSource(src *Source) Range {
	var labels [MaxLevels]uint64
	s.sourceLabels(src, &labels)
	if r := s.lookupTree(labels[:len(s.scopes)]); !s.networkMiss(r) {
		return r
	}
	return s.lookupNetwork(labels[:len(s.scopes)])
}
