//go:build !wasip1

// The agent's tree server lives in loader/, which builds for Linux only
// (make check vets the filter's tests for wasip1 too).

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/loctree/loctree/host"
	"github.com/loctree/loctree/internal/testing/wasmtest"
	"github.com/loctree/loctree/loader"
	"github.com/loctree/loctree/shared"
)

// agent is the loctree agent's tree server (loader.TreeServer, mounted at
// /v1/tree as the agent mounts it) behind a middleware that records every
// status it answered and, on demand, fails the fetch or corrupts the real
// handler's blob.
type agent struct {
	trees    loader.TreeServer
	mux      *http.ServeMux
	mu       sync.Mutex
	mode     string // "", "fail", "corrupt"
	statuses []int
	corrupts int // blobs served corrupt (each checked to fail shared.Decode)
}

func newAgent() *agent {
	a := &agent{mux: http.NewServeMux()}
	a.mux.Handle("/v1/tree", &a.trees)
	return a
}

func (a *agent) set(t *shared.Tree) { a.trees.Set(t) }

func (a *agent) setMode(m string) { a.mu.Lock(); a.mode = m; a.mu.Unlock() }

func (a *agent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	mode := a.mode
	a.mu.Unlock()
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	switch mode {
	case "fail":
		http.Error(rec, "injected failure", http.StatusInternalServerError)
	case "corrupt":
		corrupt(rec, r, a.mux)
		a.mu.Lock()
		a.corrupts++
		a.mu.Unlock()
	default:
		a.mux.ServeHTTP(rec, r)
	}
	a.mu.Lock()
	a.statuses = append(a.statuses, rec.status)
	a.mu.Unlock()
}

// corrupt asks the real handler for the full blob (as a cache that drops
// If-None-Match would) and flips a byte of its last record, so the blob
// still starts with the magic but fails its checksum.
func corrupt(w http.ResponseWriter, r *http.Request, next http.Handler) {
	r = r.Clone(r.Context())
	r.Header.Del("If-None-Match")
	res := httptest.NewRecorder()
	next.ServeHTTP(res, r)
	body := res.Body.Bytes()
	if res.Code != http.StatusOK || !bytes.HasPrefix(body, []byte("LTRE")) {
		panic(fmt.Sprintf("tree server answered %d with %q, want a blob to corrupt", res.Code, body))
	}
	body[len(body)-1] ^= 0xff
	if _, err := shared.Decode(bytes.Clone(body)); err == nil {
		panic("flipping the blob's last byte left it decodable")
	}
	maps.Copy(w.Header(), res.Header())
	w.Write(body)
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func (a *agent) corrupted() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.corrupts
}

func (a *agent) served() []int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]int(nil), a.statuses...)
}

// fetchingPool starts an agent serving a tree of topo at generation gen and
// a pool of n filter VMs that fetch from it on manual ticks.
func fetchingPool(t *testing.T, gen uint64, cluster string, n int) (*agent, *host.Host, *host.Pool) {
	t.Helper()
	ag := newAgent()
	ag.set(buildTree(t, topo, gen))
	srv := httptest.NewServer(ag)
	t.Cleanup(srv.Close)
	cfg := `{"tree":{"cluster":"` + cluster + `","refresh_ms":1000},"locality":{"region":"us-east","zone":"us-east-1b","subzone":"rack-1"}}`
	h := newHost(t, cfg, host.Options{ManualTicks: true, Upstreams: map[string]string{cluster: srv.URL}})
	pool, err := h.NewPool(context.Background(), n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return ag, h, pool
}

func TestTreeFetch(t *testing.T) {
	ag, h, pool := fetchingPool(t, 1, "outbound|15099||loctree-agent", 3)
	vms := pool.VMs()
	// The first VM to tick takes the fetch lease; the others pick the
	// published tree up from shared data on their next tick.
	tick := func() {
		t.Helper()
		pool.Tick()
		pool.WaitHTTPCalls()
		for _, vm := range vms[1:] {
			vm.Tick()
		}
	}
	everyVM := func(want string) {
		t.Helper()
		for _, vm := range vms {
			if got := pickOn(t, vm, "reviews"); got != want {
				t.Fatalf("vm %d picked %q, want %q", vm.ID(), got, want)
			}
		}
	}

	everyVM("") // no tree yet: pass through
	tick()
	everyVM("127.0.2.3:9080")
	if got := ag.served(); len(got) != 1 || got[0] != 200 {
		t.Fatalf("one VM should fetch once, the agent served %v", got)
	}
	if g, _ := h.Metrics().Value("loctree_tree_generation"); g != 1 {
		t.Fatalf("generation gauge %d, want 1", g)
	}

	tick() // unchanged: If-None-Match → 304
	if got := ag.served(); len(got) != 2 || got[1] != 304 {
		t.Fatalf("second fetch should be a 304, the agent served %v", got)
	}

	// A new generation moves us-east-1b/rack-1 to another address: every VM sees it.
	ag.set(buildTree(t, strings.Replace(topo, "127.0.2.3:9080", "127.0.2.33:9080", 1), 2))
	tick()
	everyVM("127.0.2.33:9080")

	// A failed fetch and a corrupt blob keep the last good tree; one log line a streak.
	for _, mode := range []string{"fail", "fail", "corrupt"} {
		ag.setMode(mode)
		tick()
		everyVM("127.0.2.33:9080")
	}
	if got := ag.served(); ag.corrupted() != 1 || !slices.Equal(got[len(got)-3:], []int{500, 500, 200}) {
		t.Fatalf("want two failed fetches and one corrupt blob, the agent served %v (%d corrupt)", got, ag.corrupted())
	}
	if n, _ := h.Metrics().Value("loctree_fetch_failures_total"); n != 3 {
		t.Fatalf("fetch failures %d, want 3", n)
	}
	if n := countLogs(h, "keeping tree generation 2"); n != 1 {
		t.Fatalf("%d warnings for one failure streak, want 1: %v", n, h.Logs())
	}
	ag.setMode("")
	ag.set(buildTree(t, topo, 3))
	tick()
	everyVM("127.0.2.3:9080")
	if countLogs(h, "tree fetch recovered") != 1 || countLogs(h, "installed tree generation 3") != 1 {
		t.Fatalf("recovery not logged: %v", h.Logs())
	}
	// Per-request counters reach the host on the next tick of each VM.
	pool.Tick()
	pool.WaitHTTPCalls()
	for name, want := range map[string]uint64{"loctree_picks_depth_3_total": 18, "loctree_no_tree_total": 3} {
		if got, _ := h.Metrics().Value(name); got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
}

// TestTreeFetchGenerationRestarts: an agent started afresh (after
// `loctree agent uninstall`, or another agent behind the same cluster)
// numbers its trees from 1 again. The agent is the source of truth: every
// VM must follow its tree, not keep (or flip back to) the higher generation
// still in shared data.
func TestTreeFetchGenerationRestarts(t *testing.T) {
	ag, _, pool := fetchingPool(t, 5, "agent", 2)
	tick := func() {
		t.Helper()
		pool.Tick()
		pool.WaitHTTPCalls()
	}
	everyVM := func(want string) {
		t.Helper()
		for _, vm := range pool.VMs() {
			if got := pickOn(t, vm, "reviews"); got != want {
				t.Fatalf("vm %d picked %q, want %q", vm.ID(), got, want)
			}
		}
	}
	tick()
	tick()
	everyVM("127.0.2.3:9080")

	ag.set(buildTree(t, strings.Replace(topo, "127.0.2.3:9080", "127.0.2.33:9080", 1), 1))
	for range 4 {
		tick()
	}
	everyVM("127.0.2.33:9080")
	tick()
	everyVM("127.0.2.33:9080")
}

// TestTreeFetchSameGenerationOtherContent: filters reach several agents
// through one Service, and each agent numbers its generations itself. A tree
// with the generation the filters hold but other content (another node's
// agent) must still replace it on every VM: the version is generation and
// checksum, and the agent's ETag names both.
func TestTreeFetchSameGenerationOtherContent(t *testing.T) {
	ag, _, pool := fetchingPool(t, 5, "agent", 2)
	for range 2 {
		pool.Tick()
		pool.WaitHTTPCalls()
	}
	ag.set(buildTree(t, strings.Replace(topo, "127.0.2.3:9080", "127.0.2.34:9080", 1), 5))
	for range 4 {
		pool.Tick()
		pool.WaitHTTPCalls()
	}
	for _, vm := range pool.VMs() {
		if got := pickOn(t, vm, "reviews"); got != "127.0.2.34:9080" {
			t.Fatalf("vm %d picked %q: it kept the other generation-5 tree", vm.ID(), got)
		}
	}
}

// TestVMMemoryFetching: the VM that fetches the tree from the agent
// (proxy_http_call, the body decoded in place and published) holds one
// copy of it, as a VM fed from shared data does: at 100,000 endpoints,
// after 10,000 requests, at most the floor plus twice the blob; a fetched
// update frees the old tree within the callback that installs the new one,
// and peaks at most one blob over the steady state.
// Run with -v for the numbers.
func TestVMMemoryFetching(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 100,000-endpoint trees")
	}
	floor := requestsThenMeasure(t, agentFedVM(t, "floor", grownTree(t, 1)), newFullStream(), false)
	top := benchGrownTopology(100000)
	ag := newAgent()
	tree := grownTree(t, 100000)
	ag.set(tree)
	srv := httptest.NewServer(ag)
	t.Cleanup(srv.Close)
	loc, _ := json.Marshal(grownSource)
	h, err := host.New(context.Background(), wasmtest.BytesTags(t, ".", memstatsTag), host.Options{ManualTicks: true, Cache: wasmCache,
		PluginConfig: fmt.Appendf(nil, `{"tree":{"cluster":"agent","refresh_ms":1000},"locality":%s}`, loc), Upstreams: map[string]string{"agent": srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	vm := workerVM(t, h)
	fetch := func() {
		t.Helper()
		if err := vm.Tick(); err != nil {
			t.Fatal(err)
		}
		vm.WaitHTTPCalls()
	}
	fetch()
	m, blob := requestsThenMeasure(t, vm, newFullStream(), true), uint64(len(tree.Bytes()))
	t.Logf("fetching VM, 100000 endpoints: %v; blob %.2f MiB; over the floor %.2f blobs", m, mib(blob), blobs(m.linear-floor.linear, blob))
	if m.linear > floor.linear+2*blob {
		t.Errorf("%.2f MiB of linear memory, over the floor (%.2f) + 2 × blob (%.2f MiB)", mib(m.linear), mib(floor.linear), mib(2*blob))
	}
	w := uint32(2)
	top.Services[0].Endpoints[2].Weight = &w
	ag.set(buildGrown(t, top, 2))
	fetch()
	after := measureVM(t, vm)
	t.Logf("fetching VM after fetching generation 2: %v", after)
	if after.objects > m.live+m.live/4 {
		t.Errorf("%.2f MiB of heap objects after the fetched update, over 1.25 × the steady live heap %.2f MiB", mib(after.objects), mib(m.live))
	}
	if after.linear > m.linear+blob {
		t.Errorf("the fetched update peaks at %.2f MiB of linear memory, over steady (%.2f) + one blob (%.2f MiB)", mib(after.linear), mib(m.linear), mib(blob))
	}
}

func buildGrown(t *testing.T, top *shared.Topology, gen uint64) *shared.Tree {
	t.Helper()
	tree, err := shared.Build(top, shared.BuildOptions{Generation: gen})
	if err != nil {
		t.Fatal(err)
	}
	return tree
}
