//go:build wasip1 && loctree_memstats

package abi

import (
	"runtime"
	"runtime/metrics"
)

// The memory statistics hook of test builds (-tags loctree_memstats): the
// production module exports neither function. Tests read the Go runtime's
// view of a VM's memory with host.VM.CallExport.

// memStatNames are the runtime/metrics samples loctree_memstat reads, by
// index: the GC's view first, then every class of /memory/classes (which
// sum to its total).
func memStatNames() [19]string {
	return [...]string{
		"/gc/heap/live:bytes",                         // 0: marked live by the last GC
		"/memory/classes/heap/objects:bytes",          // 1: objects, live or not yet swept
		"/gc/heap/goal:bytes",                         // 2: the heap size the next GC aims at
		"/memory/classes/total:bytes",                 // 3: all memory the runtime mapped
		"/memory/classes/heap/free:bytes",             // 4: free heap, reusable
		"/gc/cycles/total:gc-cycles",                  // 5: completed GC cycles
		"/memory/classes/heap/released:bytes",         // 6
		"/memory/classes/heap/stacks:bytes",           // 7
		"/memory/classes/heap/unused:bytes",           // 8: in spans, not in objects
		"/memory/classes/metadata/mcache/free:bytes",  // 9
		"/memory/classes/metadata/mcache/inuse:bytes", // 10
		"/memory/classes/metadata/mspan/free:bytes",   // 11
		"/memory/classes/metadata/mspan/inuse:bytes",  // 12
		"/memory/classes/metadata/other:bytes",        // 13: GC bitmaps, arena and page metadata
		"/memory/classes/os-stacks:bytes",             // 14
		"/memory/classes/other:bytes",                 // 15
		"/memory/classes/profiling/buckets:bytes",     // 16
		"/gc/heap/allocs:bytes",                       // 17: allocated since start
		"/gc/heap/frees:bytes",                        // 18: freed since start
	}
}

// loctree_memstat returns runtime/metrics sample i of memStatNames, or
// 1<<64-1 for an unknown index.
//
//go:wasmexport loctree_memstat
func memStat(i uint32) uint64 {
	names := memStatNames()
	if int(i) >= len(names) {
		return ^uint64(0)
	}
	s := []metrics.Sample{{Name: names[i]}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// loctree_gc runs a full garbage collection.
//
//go:wasmexport loctree_gc
func collect() { runtime.GC() }
