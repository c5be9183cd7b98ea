package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loctree/loctree/host"
	"github.com/loctree/loctree/shared"
)

// agent serves GET /v1/tree like the loctree agent (ETag = generation, 304
// on If-None-Match), and can be told to fail or to serve a corrupt blob.
type agent struct {
	mu       sync.Mutex
	blob     []byte
	etag     string
	mode     string // "", "fail", "corrupt"
	statuses []int
}

func (a *agent) set(t *shared.Tree) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.blob, a.etag = t.Bytes(), strconv.Quote(strconv.FormatUint(t.Generation(), 10))
}

func (a *agent) setMode(m string) { a.mu.Lock(); a.mode = m; a.mu.Unlock() }

func (a *agent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	status := http.StatusOK
	switch {
	case r.URL.Path != "/v1/tree":
		status = http.StatusNotFound
	case a.mode == "fail":
		status = http.StatusInternalServerError
	case a.mode == "corrupt":
		w.Header().Set("ETag", `"999"`)
		w.Write([]byte("LTRE this is not a tree"))
	case r.Header.Get("If-None-Match") == a.etag:
		w.Header().Set("ETag", a.etag)
		status = http.StatusNotModified
	default:
		w.Header().Set("ETag", a.etag)
		w.Write(a.blob)
	}
	if status != http.StatusOK {
		w.WriteHeader(status)
	}
	a.statuses = append(a.statuses, status)
}

func (a *agent) served() []int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]int(nil), a.statuses...)
}

func buildTree(t *testing.T, topology string, gen uint64) *shared.Tree {
	t.Helper()
	c, err := parseConfig([]byte(`{"topology":` + topology + `}`))
	if err != nil {
		t.Fatal(err)
	}
	tree, err := shared.Build(c.Topology, shared.BuildOptions{Generation: gen})
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// pickOn sends one request for service to vm and returns the header.
func pickOn(t *testing.T, vm *host.VM, service string) string {
	t.Helper()
	res, err := vm.Do(context.Background(), &host.Request{Headers: host.Headers(req(service))}, nil)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := res.Request.Headers.Get(defaultHeader)
	return v
}

func TestTreeFetch(t *testing.T) {
	ag := &agent{}
	ag.set(buildTree(t, topo, 1))
	srv := httptest.NewServer(ag)
	defer srv.Close()
	cfg := `{"tree":{"cluster":"outbound|15099||loctree-agent","refresh_ms":1000},"locality":{"region":"us-east","zone":"us-east-1b","subzone":"rack-1"}}`
	h := newHost(t, cfg, host.Options{ManualTicks: true, Upstreams: map[string]string{"outbound|15099||loctree-agent": srv.URL}})
	pool, err := h.NewPool(context.Background(), 3)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
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

func countLogs(h *host.Host, substr string) int {
	n := 0
	for _, l := range h.Logs() {
		if strings.Contains(l.Message, substr) {
			n++
		}
	}
	return n
}

func timeDuration(ns int64) time.Duration { return time.Duration(ns) }
