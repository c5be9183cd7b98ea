package main

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/loctree/loctree/host"
	"github.com/loctree/loctree/internal/testing/wasmtest"
	"github.com/loctree/loctree/shared"
)

// vmMemory is one VM's memory: its linear memory and the Go runtime's view
// from inside it (runtime/metrics, through the test build's hook).
type vmMemory struct {
	linear  uint64 // linear memory size
	mapped  uint64 // /memory/classes/total: all the runtime mapped
	objects uint64 // heap objects before a forced GC (live or unswept)
	goal    uint64 // the next GC's heap goal
	live    uint64 // heap objects after a forced GC
}

// The indices of loctree_memstat (filter/internal/abi/memstats_wasip1.go).
const (
	statObjects = 1
	statGoal    = 2
	statTotal   = 3
)

// measureVM reads vm's memory; it runs a full GC last, so the linear
// memory and the heap before it are as the requests left them.
func measureVM(tb testing.TB, vm *host.VM) vmMemory {
	tb.Helper()
	stat := func(i uint64) uint64 {
		v, err := vm.CallExport("loctree_memstat", i)
		if err != nil {
			tb.Fatal(err)
		}
		return v
	}
	m := vmMemory{linear: uint64(vm.MemorySize()), mapped: stat(statTotal), objects: stat(statObjects), goal: stat(statGoal)}
	if _, err := vm.CallExport("loctree_gc"); err != nil {
		tb.Fatal(err)
	}
	m.live = stat(statObjects)
	return m
}

func (m vmMemory) String() string {
	return fmt.Sprintf("linear %.2f MiB, runtime mapped %.2f MiB, heap objects %.2f MiB (goal %.2f), live after GC %.2f MiB",
		mib(m.linear), mib(m.mapped), mib(m.objects), mib(m.goal), mib(m.live))
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }

// memoryBudgetRequests is how many requests a VM answers before it is
// measured (issue 24's budget is "after 10,000 requests").
const memoryBudgetRequests = 10000

// TestVMMemoryBudget: after 10,000 requests, what a tree adds to a worker
// VM's linear memory (over the same VM with a one-endpoint tree) is at
// most twice the blob, at 10,000 and 100,000 endpoints of the four-scope
// grown mesh; and at 100,000 the VM holds at most the floor's linear
// memory (the empty filter, same requests) plus twice the blob. At 10,000
// endpoints the filter's fixed cost over the floor (its code, data and
// runtime state: about 1.5 MiB) alone exceeds twice the blob (0.66 MiB):
// the test logs that budget (docs/WASM.md, "Memory at mesh scale"). Run
// with -v for the breakdown.
func TestVMMemoryBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 100,000-endpoint tree")
	}
	floor := requestsThenMeasure(t, agentFedVM(t, "floor", grownTree(t, 1)), newFullStream(), false)
	fixed := requestsThenMeasure(t, agentFedVM(t, "loctree", grownTree(t, 1)), newFullStream(), true)
	t.Logf("floor: %v", floor)
	t.Logf("loctree, 1 endpoint: %v", fixed)
	for _, n := range []int{10000, 100000} {
		tree := grownTree(t, n)
		m := requestsThenMeasure(t, agentFedVM(t, "loctree", tree), newFullStream(), true)
		blob := uint64(len(tree.Bytes()))
		t.Logf("loctree, %d endpoints: %v; blob %.2f MiB; over the floor %.2f blobs, over 1 endpoint %.2f blobs",
			n, m, mib(blob), blobs(m.linear-floor.linear, blob), blobs(m.linear-fixed.linear, blob))
		if m.linear > fixed.linear+2*blob {
			t.Errorf("endpoints=%d: the tree adds %.2f MiB of linear memory, over 2 × blob (%.2f MiB)", n, mib(m.linear-fixed.linear), mib(2*blob))
		}
		if n >= 100000 && m.linear > floor.linear+2*blob {
			t.Errorf("endpoints=%d: %.2f MiB of linear memory, over the floor (%.2f) + 2 × blob (%.2f MiB)", n, mib(m.linear), mib(floor.linear), mib(2*blob))
		}
	}
}

// agentFedVM is a worker VM of the named compared module (memory
// statistics build) fed tree by the agent.
func agentFedVM(tb testing.TB, module string, tree *shared.Tree) *host.VM {
	for _, m := range comparedModules() {
		if m.name == module {
			return workerVM(tb, agentFedHost(tb, m.wasm(tb, memstatsTag), tree))
		}
	}
	tb.Fatalf("no module %q", module)
	return nil
}

func blobs(n, blob uint64) float64 { return float64(n) / float64(blob) }

// TestVMMemoryTreeUpdate: a worker VM at 10,000 and 100,000 endpoints
// that picks up tree generation N+1 from shared data (a tick) frees
// generation N within that tick: its heap in use is back to one tree's,
// not two, when the tick returns; further updates reuse that memory, so
// its linear memory stops growing after the first update; and at 100,000
// endpoints an update peaks (the linear memory keeps its peak) at most one
// blob over the steady state (issue 24 §1). At 10,000 endpoints the blob
// (0.33 MiB) is the size of the runtime's own steps (its heap and metadata
// grow by some 64-512 KiB at a time): the test logs that budget. Run with
// -v for peak and steady state.
func TestVMMemoryTreeUpdate(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 100,000-endpoint trees")
	}
	for _, n := range []int{10000, 100000} {
		t.Run(fmt.Sprintf("endpoints=%d", n), func(t *testing.T) { testTreeUpdate(t, n) })
	}
}

func testTreeUpdate(t *testing.T, n int) {
	top := benchGrownTopology(n)
	first := grownTree(t, n)
	blob := uint64(len(first.Bytes()))
	h := agentFedHost(t, wasmtest.BytesTags(t, ".", memstatsTag), first)
	vm := workerVM(t, h)
	s := newFullStream()
	steady := requestsThenMeasure(t, vm, s, true)
	t.Logf("generation 1, steady: %v", steady)
	var linear []uint64
	for gen := uint64(2); gen <= 4; gen++ {
		w := uint32(gen)
		top.Services[0].Endpoints[gen].Weight = &w // a different tree, same size
		tree, err := shared.Build(top, shared.BuildOptions{Generation: gen})
		if err != nil {
			t.Fatal(err)
		}
		publishShared(h, tree)
		start := time.Now()
		if err := vm.Tick(); err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		after := measureVM(t, vm)
		t.Logf("generation %d, right after the tick that installed it (%v): %v", gen, took.Round(time.Millisecond/10), after)
		if after.objects > steady.live+steady.live/4 {
			t.Errorf("generation %d: %.2f MiB of heap objects after the update, over 1.25 × the steady live heap %.2f MiB: the old tree outlived the tick",
				gen, mib(after.objects), mib(steady.live))
		}
		linear = append(linear, requestsThenMeasure(t, vm, s, true).linear)
	}
	t.Logf("linear memory after each update and 10,000 requests: %v MiB (steady %.2f MiB, blob %.2f MiB)", mibs(linear), mib(steady.linear), mib(blob))
	if linear[2] > linear[1] {
		t.Errorf("linear memory still grows with each update: %v MiB", mibs(linear))
	}
	if peak := slices.Max(linear); n >= 100000 && peak > steady.linear+blob {
		t.Errorf("an update peaks at %.2f MiB of linear memory, over steady (%.2f) + one blob (%.2f MiB): two trees were live at once",
			mib(peak), mib(steady.linear), mib(blob))
	}
}

// requestsThenMeasure answers memoryBudgetRequests requests on vm (with
// picks, checking each picked) and measures it.
func requestsThenMeasure(tb testing.TB, vm *host.VM, s fullStream, picks bool) vmMemory {
	for range memoryBudgetRequests {
		if res := s.do(tb, vm); picks && len(res.Request.Headers) != 5 {
			tb.Fatalf("no pick: %v", res.Request.Headers)
		}
	}
	return measureVM(tb, vm)
}

func mibs(v []uint64) []string {
	var out []string
	for _, n := range v {
		out = append(out, fmt.Sprintf("%.2f", mib(n)))
	}
	return out
}

// TestVMMemoryInlineTopology: a VM that builds a 10,000-endpoint tree from
// an inline topology frees the parsed topology once the tree is built: its
// heap in use after start is at most twice the blob, as a VM fed the same
// tree by the agent (the linear memory keeps the build's high-water mark).
func TestVMMemoryInlineTopology(t *testing.T) {
	tree, err := shared.Build(benchTopology(10000), shared.BuildOptions{Generation: 1})
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.New(context.Background(), wasmtest.BytesTags(t, ".", memstatsTag),
		host.Options{ManualTicks: true, Cache: wasmCache, PluginConfig: []byte(benchConfig(10000))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	vm := workerVM(t, h)
	if v := pickOn(t, vm, "reviews"); v == "" {
		t.Fatal("no pick")
	}
	m, blob := measureVM(t, vm), uint64(len(tree.Bytes()))
	t.Logf("inline 10,000 endpoints: %v; blob %.2f MiB", m, mib(blob))
	if m.objects > 2*blob {
		t.Errorf("%.2f MiB of heap objects after an inline start, over 2 × blob (%.2f MiB): the parsed topology outlived the build", mib(m.objects), mib(2*blob))
	}
}

// TestVMLeavesNoGCPending: a Go reactor runs its goroutines only inside
// callbacks, so a collection that a callback's allocations start can stay
// in its mark phase (write barriers on every pointer store: 0.4 µs a
// request on V8 at 100,000 endpoints) while callbacks that do not block
// come and go. The filter finishes it: after a start that installed a
// 100,000-endpoint tree, after requests, and after a tick, no collection
// is pending (the heap is under the next goal).
func TestVMLeavesNoGCPending(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 100,000-endpoint tree")
	}
	vm := agentFedVM(t, "loctree", grownTree(t, 100000))
	pending := func(when string) {
		t.Helper()
		o, _ := vm.CallExport("loctree_memstat", statObjects)
		g, _ := vm.CallExport("loctree_memstat", statGoal)
		if o >= g {
			t.Errorf("%s: %.2f MiB of heap objects over the goal %.2f MiB: a collection is pending", when, mib(o), mib(g))
		}
	}
	pending("after start")
	s := newFullStream()
	for range 1000 {
		s.do(t, vm)
	}
	pending("after 1,000 requests")
	if err := vm.Tick(); err != nil {
		t.Fatal(err)
	}
	pending("after a tick")
}
