package main

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/loctree/loctree/host"
	"github.com/loctree/loctree/internal/testing/wasmtest"
	"github.com/loctree/loctree/shared"
)

// The floor of a Go proxy-wasm filter is testdata/empty: the same
// compiler, flags and ABI layer as loctree's filter, callbacks that do
// nothing. testdata/hostcalls is the floor plus the host calls loctree's
// filter makes on a request. Tests here run the modules side by side.

// memstatsTag builds the modules with their memory statistics hook
// (filter/internal/abi/memstats_wasip1.go).
const memstatsTag = "loctree_memstats"

// filterModule is one of the two modules compared.
type filterModule struct {
	name string
	wasm func(testing.TB, string) []byte // by build tags
}

func comparedModules() []filterModule {
	return []filterModule{
		{"floor", func(tb testing.TB, tags string) []byte { return wasmtest.BytesTags(tb, "./testdata/empty", tags) }},
		{"hostcalls", func(tb testing.TB, tags string) []byte { return wasmtest.BytesTags(tb, "./testdata/hostcalls", tags) }},
		{"loctree", func(tb testing.TB, tags string) []byte {
			if tags == "" {
				return loctreeWasm(tb)
			}
			return wasmtest.BytesTags(tb, ".", tags)
		}},
	}
}

// agentFedHost is a host of wasm whose VMs start from tree, published in
// shared data as the fetching VM publishes it, for a proxy at grownSource.
func agentFedHost(tb testing.TB, wasm []byte, tree *shared.Tree) *host.Host {
	tb.Helper()
	loc, _ := json.Marshal(grownSource)
	h, err := host.New(context.Background(), wasm, host.Options{ManualTicks: true, Cache: wasmCache,
		PluginConfig: fmt.Appendf(nil, `{"tree":{"cluster":"agent"},"locality":%s}`, loc)})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { h.Close(context.Background()) })
	publishShared(h, tree)
	return h
}

// fullStream is one request through Envoy's whole HTTP lifecycle: context
// create, request headers, the upstream's response headers, on_log,
// on_done, on_delete.
type fullStream struct {
	req      *host.Request
	upstream host.Upstream
}

func newFullStream() fullStream {
	resp := &host.Response{Headers: host.Headers{{":status", "200"}}}
	return fullStream{
		req:      &host.Request{Headers: host.Headers(req("reviews:9080"))},
		upstream: func(context.Context, *host.Request) (*host.Response, error) { return resp, nil },
	}
}

// do runs the stream once on vm and fails tb unless it reached the
// response.
func (s fullStream) do(tb testing.TB, vm *host.VM) *host.Result {
	res, err := vm.Do(context.Background(), s.req, s.upstream)
	if err != nil || res.Response == nil {
		tb.Fatalf("request: %v (response %v)", err, res)
	}
	return res
}

// BenchmarkRequestAgainstFloor is one request through Envoy's full HTTP
// lifecycle (context create, request headers, response headers, on_log,
// on_done, on_delete) in the wazero host, for the empty filter (floor),
// the floor plus loctree's host calls (hostcalls) and loctree's filter on
// the four-scope grown mesh, interleaved in blocks of 64 requests so that
// all see the same machine load. It reports the median of the blocks'
// per-request times of each and their distance to the floor, the host
// allocations per request of each, and each VM's linear memory after the
// requests. One op is one block of each.
func BenchmarkRequestAgainstFloor(b *testing.B) {
	for _, n := range []int{100, 10000, 100000} {
		tree := grownTree(b, n)
		b.Run(fmt.Sprintf("endpoints=%d/grown", n), func(b *testing.B) {
			var vms []*host.VM
			for _, m := range comparedModules() {
				vms = append(vms, workerVM(b, agentFedHost(b, m.wasm(b, ""), tree)))
			}
			benchAgainstFloor(b, vms)
		})
	}
}

// floorBlock is the number of requests timed together.
const floorBlock = 64

// benchAgainstFloor alternates blocks of requests on the VMs of
// comparedModules (the floor first) and reports each.
func benchAgainstFloor(b *testing.B, vms []*host.VM) {
	s := newFullStream()
	mods := comparedModules()
	ns, allocs := make([][]float64, len(vms)), make([]uint64, len(vms))
	for b.Loop() {
		for i, vm := range vms {
			t, a := s.block(b, vm, mods[i].name == "loctree")
			ns[i], allocs[i] = append(ns[i], t), allocs[i]+a
		}
	}
	blocks := float64(len(ns[0]))
	for i, m := range mods {
		b.ReportMetric(median(ns[i]), "ns/request("+m.name+")")
		b.ReportMetric(float64(allocs[i])/blocks/floorBlock, "allocs/request("+m.name+")")
		b.ReportMetric(float64(vms[i].MemorySize())/(1<<20), "MiB-linear-memory("+m.name+")")
		if i > 0 {
			b.ReportMetric(median(ns[i])-median(ns[0]), "ns/request("+m.name+"-floor)")
		}
	}
}

// block runs floorBlock requests on vm and returns the time per request
// and the host's allocations; with picks it checks that each one picked.
func (s fullStream) block(tb testing.TB, vm *host.VM, picks bool) (float64, uint64) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	for range floorBlock {
		if res := s.do(tb, vm); picks && len(res.Request.Headers) != 5 {
			tb.Fatalf("no pick: %v", res.Request.Headers)
		}
	}
	d := time.Since(start)
	runtime.ReadMemStats(&after)
	return float64(d.Nanoseconds()) / floorBlock, after.Mallocs - before.Mallocs
}

func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}

// workerVM starts a worker VM of h, closed when tb ends.
func workerVM(tb testing.TB, h *host.Host) *host.VM {
	tb.Helper()
	vm, err := h.NewVM(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { vm.Close() })
	return vm
}

// grownTree builds benchGrownTopology(n).
func grownTree(tb testing.TB, n int) *shared.Tree {
	tb.Helper()
	tree, err := shared.Build(benchGrownTopology(n), shared.BuildOptions{Generation: 1})
	if err != nil {
		tb.Fatal(err)
	}
	return tree
}
