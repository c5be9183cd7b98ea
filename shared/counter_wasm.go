//go:build wasm

package shared

// Go's wasm port runs one thread (internal/runtime/atomic/atomic_wasm.go:
// "implement with actual atomic operations as soon as threads are
// available"), and there every sync/atomic operation is a call to a
// //go:noinline function. A request of the filter counts and reads
// several in-flight counts (Picker.Inc, Done, Widen), so in wasm they are
// plain values whose methods inline; they keep sync/atomic's method set.

// counter is an in-flight count.
type counter struct{ v int32 }

func (c *counter) Load() int32       { return c.v }
func (c *counter) Add(d int32) int32 { c.v += d; return c.v }
func (c *counter) CompareAndSwap(old, new int32) bool {
	if c.v != old {
		return false
	}
	c.v = new
	return true
}

// wideFlag is a node's widening state.
type wideFlag struct{ v bool }

func (f *wideFlag) Load() bool   { return f.v }
func (f *wideFlag) Store(v bool) { f.v = v }

// counters holds a Picker's in-flight counts, made at the first Inc.
type counters struct{ p *[]counter }

func (c *counters) Load() *[]counter   { return c.p }
func (c *counters) Store(p *[]counter) { c.p = p }
