package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/loctree/loctree/filter/shareddata"
	"github.com/loctree/loctree/shared"
)

// v8Result is what testdata/v8/proxywasm.js reports for one module.
type v8Result struct {
	NsPerRequest float64 `json:"ns_per_request"`
	Picks        int     `json:"picks"`
	Requests     int     `json:"requests"`
	BaseLinear   uint64  `json:"base_linear_bytes"`
	Linear       uint64  `json:"linear_bytes"`
	Memstats     *struct {
		HeapObjects  uint64 `json:"heap_objects"`
		Goal         uint64 `json:"gc_goal"`
		RuntimeTotal uint64 `json:"runtime_total"`
		Live         uint64 `json:"live_after_gc"`
	} `json:"memstats"`
}

// runV8 runs the floor and loctree's filter (memory statistics builds) on
// Node's V8 with --no-liftoff, as proxy-wasm-cpp-host configures V8
// (src/v8/v8.cc), fed tree by shared data, for requests requests each.
// It skips when node is missing.
func runV8(t *testing.T, tree *shared.Tree, requests int) map[string]v8Result {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: no V8 to run the modules on")
	}
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ver := blobVersion(tree.Bytes())
	loc, _ := json.Marshal(grownSource)
	var modules []map[string]string
	for _, m := range comparedModules() {
		modules = append(modules, map[string]string{"name": m.name, "wasm": write(m.name+".wasm", m.wasm(t, memstatsTag))})
	}
	b, _ := json.Marshal(map[string]any{
		"config":   fmt.Sprintf(`{"tree":{"cluster":"agent"},"locality":%s}`, loc),
		"shared":   map[string]string{shareddata.Tree: write("tree.bin", tree.Bytes()), shareddata.Generation: write("generation.bin", ver[:])},
		"requests": requests,
		"modules":  modules,
	})
	out, err := exec.Command(node, "--no-liftoff", "testdata/v8/proxywasm.js", write("job.json", b)).Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, stderrOf(err))
	}
	var res map[string]v8Result
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("node's answer %q: %v", out, err)
	}
	return res
}

func stderrOf(err error) []byte {
	var e *exec.ExitError
	if errors.As(err, &e) {
		return e.Stderr
	}
	return nil
}

// TestV8MemoryBudget is TestVMMemoryBudget on V8 (Node, --no-liftoff,
// testdata/v8/proxywasm.js): after 10,000 requests, the tree adds at most
// twice the blob to a worker VM's linear memory at 10,000 and 100,000
// endpoints, and at 100,000 the VM holds at most the floor plus twice the
// blob. Each request picks. Run with -v for the numbers.
func TestV8MemoryBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 100,000-endpoint tree")
	}
	fixed := runV8(t, grownTree(t, 1), memoryBudgetRequests)
	logV8(t, 1, 0, fixed)
	for _, n := range []int{10000, 100000} {
		tree := grownTree(t, n)
		blob := uint64(len(tree.Bytes()))
		res := runV8(t, tree, memoryBudgetRequests)
		logV8(t, n, blob, res)
		lt := res["loctree"]
		if lt.Picks != lt.Requests {
			t.Fatalf("endpoints=%d: %d picks in %d requests", n, lt.Picks, lt.Requests)
		}
		if lt.Linear > fixed["loctree"].Linear+2*blob {
			t.Errorf("endpoints=%d: the tree adds %.2f MiB of linear memory on V8, over 2 × blob (%.2f MiB)", n, mib(lt.Linear-fixed["loctree"].Linear), mib(2*blob))
		}
		if n >= 100000 && lt.Linear > res["floor"].Linear+2*blob {
			t.Errorf("endpoints=%d: %.2f MiB of linear memory on V8, over the floor (%.2f) + 2 × blob (%.2f MiB)", n, mib(lt.Linear), mib(res["floor"].Linear), mib(2*blob))
		}
	}
}

func logV8(t *testing.T, n int, blob uint64, res map[string]v8Result) {
	for _, m := range comparedModules() {
		name, r := m.name, res[m.name]
		t.Logf("V8 endpoints=%d blob %.2f MiB %s: base VM %.2f MiB, worker %.2f MiB after %d requests, %.0f ns/request (median of blocks), memstats %+v",
			n, mib(blob), name, mib(r.BaseLinear), mib(r.Linear), r.Requests, r.NsPerRequest, *r.Memstats)
	}
}
