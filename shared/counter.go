//go:build !wasm

package shared

import "sync/atomic"

// What every request reads and writes for the in-flight counts: a count
// (counter), a node's widening state (wideFlag) and the pointer to a
// Picker's counts, made at the first Inc (counters). Here they are
// sync/atomic's types, as a Picker is safe for concurrent use;
// counter_wasm.go has the single-threaded ones.
type (
	counter  = atomic.Int32
	wideFlag = atomic.Bool
	counters = atomic.Pointer[[]counter]
)
