package kernel

import "slices"

// span is a region [start, start+len) of a BPF array map.
type span struct{ start, len uint32 }

// allocator hands out regions of one array map, first fit. Services are
// double-buffered through it: a changed service is written to a fresh region
// while readers may still walk the old one, which is freed after an RCU grace
// period (grace.go).
type allocator struct {
	size uint32
	free []span // sorted by start, coalesced
}

func newAllocator(size uint32) *allocator {
	return &allocator{size: size, free: []span{{0, size}}}
}

// alloc returns the start of a free region of n entries.
func (a *allocator) alloc(n uint32) (uint32, bool) {
	if n == 0 {
		return 0, true
	}
	for i, f := range a.free {
		if f.len < n {
			continue
		}
		a.free[i] = span{f.start + n, f.len - n}
		if a.free[i].len == 0 {
			a.free = slices.Delete(a.free, i, i+1)
		}
		return f.start, true
	}
	return 0, false
}

// release gives a region back.
func (a *allocator) release(s span) {
	if s.len == 0 {
		return
	}
	i, _ := slices.BinarySearchFunc(a.free, s.start, func(f span, start uint32) int { return int(int64(f.start) - int64(start)) })
	a.free = slices.Insert(a.free, i, s)
	if i+1 < len(a.free) && a.free[i].start+a.free[i].len == a.free[i+1].start {
		a.free[i].len += a.free[i+1].len
		a.free = slices.Delete(a.free, i+1, i+2)
	}
	if i > 0 && a.free[i-1].start+a.free[i-1].len == a.free[i].start {
		a.free[i-1].len += a.free[i].len
		a.free = slices.Delete(a.free, i, i+1)
	}
}

// reserve marks a region as used (re-adopting what an earlier agent
// installed). It reports false if the region is not wholly free.
func (a *allocator) reserve(s span) bool {
	if s.len == 0 {
		return true
	}
	for i, f := range a.free {
		if s.start < f.start || s.start+s.len > f.start+f.len {
			continue
		}
		before := span{f.start, s.start - f.start}
		after := span{s.start + s.len, f.start + f.len - s.start - s.len}
		repl := make([]span, 0, 2)
		for _, p := range []span{before, after} {
			if p.len > 0 {
				repl = append(repl, p)
			}
		}
		a.free = slices.Replace(a.free, i, i+1, repl...)
		return true
	}
	return false
}

// available is the number of free entries.
func (a *allocator) available() uint32 {
	var n uint32
	for _, f := range a.free {
		n += f.len
	}
	return n
}

func (a *allocator) clone() *allocator {
	return &allocator{size: a.size, free: slices.Clone(a.free)}
}
