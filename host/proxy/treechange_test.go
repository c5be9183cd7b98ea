package proxy

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loctree/loctree/filter/shareddata"
	"github.com/loctree/loctree/host"
	"github.com/loctree/loctree/internal/testing/wasmtest"
	"github.com/loctree/loctree/shared"
)

// While the tree changes, every request a worker routes by the tree it
// holds is forwarded: workers pick up a new tree each on its own tick, so
// for a while they hold different trees, and an endpoint of a tree a worker
// still holds is not "outside the tree". Before the fix 1–7 % of requests
// were 502 "… is not an endpoint of the current tree".
func TestTreeChangeNoBadGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the filter")
	}
	module := wasmtest.Bytes(t, "../../filter")
	backends := make([]string, 6)
	for i := range backends {
		backends[i] = echo(t, fmt.Sprintf("127.0.9.%d", i+1))
	}
	agent := rotatingAgent(t, backends)
	h, err := host.New(context.Background(), module, host.Options{
		PluginConfig: []byte(`{"tree":{"cluster":"agent","refresh_ms":10},"locality":{"region":"r"}}`),
		PluginName:   "loctree", RootID: "loctree",
		Upstreams: map[string]string{"agent": strings.TrimPrefix(agent.URL, "http://")},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	pool, err := h.NewPool(context.Background(), 4)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	allow := &TreeAllowlist{Shared: h.Shared()}
	front := httptest.NewServer(&Proxy{Pool: pool, Header: "x-gateway-destination-endpoint", Allowed: allow.Allowed})
	defer front.Close()
	awaitTree(t, h.Shared())
	// Requests run until the tree changed at least 20 times: 2 s do it on a
	// quiet machine; under the race detector on a loaded one it takes longer.
	start, ok, bad, first := agent.generation(), int64(0), int64(0), ""
	for deadline := time.Now().Add(30 * time.Second); agent.generation()-start < 20 && time.Now().Before(deadline); {
		o, b, f := hammer(t, front.URL, 2*time.Second)
		ok, bad = ok+o, bad+b
		if first == "" {
			first = f
		}
	}
	if changes := agent.generation() - start; changes < 20 {
		t.Fatalf("the tree changed %d times in 30 s of requests, want at least 20", changes)
	}
	if bad > 0 || ok == 0 {
		t.Fatalf("%d of %d requests failed while the tree changed; first: %s", bad, ok+bad, first)
	}
}

// A worker that holds a tree the allowlist never saw (published and
// replaced between two requests) is brought up to date by a tick before its
// request is refused. Before the fix its request was a 502.
func TestTreeChangeLaggingWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the filter")
	}
	module := wasmtest.Bytes(t, "../../filter")
	backends := make([]string, 6)
	for i := range backends {
		backends[i] = echo(t, fmt.Sprintf("127.0.9.%d", i+11))
	}
	agent := rotatingAgent(t, backends)
	h, err := host.New(context.Background(), module, host.Options{
		PluginConfig: []byte(`{"tree":{"cluster":"agent","refresh_ms":1000},"locality":{"region":"r"}}`),
		PluginName:   "loctree", RootID: "loctree", ManualTicks: true,
		Upstreams: map[string]string{"agent": strings.TrimPrefix(agent.URL, "http://")},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	pool, err := h.NewPool(context.Background(), 2)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	allow := &TreeAllowlist{Shared: h.Shared()}
	front := httptest.NewServer(&Proxy{Pool: pool, Header: "x-gateway-destination-endpoint", Allowed: allow.Allowed})
	defer front.Close()
	fetcher, lagger := pool.VMs()[0], pool.VMs()[1]
	fetch := func() { // the fetcher asks the agent for a new tree and publishes it
		if err := fetcher.Tick(); err != nil {
			t.Fatal(err)
		}
		fetcher.WaitHTTPCalls()
	}
	fetch()
	lagger.Tick()
	get(t, front.URL, 2) // both hold tree 1, which the allowlist sees
	fetch()
	lagger.Tick() // the lagger holds tree 2, which no request saw
	fetch()       // tree 3 replaces it in shared data
	if g := agent.generation(); g != 3 {
		t.Fatalf("the agent served %d trees, want 3", g)
	}
	get(t, front.URL, 2) // one request to each worker
}

// get sends n requests for reviews and fails unless every one is a 200.
func get(t *testing.T, url string, n int) {
	t.Helper()
	for range n {
		req, _ := http.NewRequest(http.MethodGet, url+"/", nil)
		req.Host = "reviews"
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
		}
	}
}

// echo serves its own address on ip (a free port).
func echo(t *testing.T, ip string) string {
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatalf("listen on %s: %v", ip, err)
	}
	self := ln.Addr().String()
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, self)
	}))
	s.Listener.Close()
	s.Listener = ln
	s.Start()
	t.Cleanup(s.Close)
	return self
}

// agent is a tree server whose every answer is a new generation whose one
// service "reviews" has two of the backends, the next two each time: no
// endpoint of a tree is in the tree before or after it.
type agent struct {
	*httptest.Server
	gen atomic.Uint64
}

func (a *agent) generation() uint64 { return a.gen.Load() }

func rotatingAgent(t *testing.T, backends []string) *agent {
	a := &agent{}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		g := a.gen.Add(1)
		var eps []shared.EndpointSpec
		for k := range uint64(2) {
			eps = append(eps, shared.EndpointSpec{Address: backends[(2*g+k)%uint64(len(backends))], Locality: shared.Locality{"region": "r"}})
		}
		tree, err := shared.Build(&shared.Topology{Services: []shared.ServiceSpec{{Name: "reviews", Endpoints: eps}}},
			shared.BuildOptions{Generation: g})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("ETag", fmt.Sprintf(`"%d"`, g))
		w.Write(tree.Bytes())
	}))
	t.Cleanup(a.Close)
	return a
}

// awaitTree waits until a worker published a tree in shared data.
func awaitTree(t *testing.T, sd *host.SharedData) {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, ok := sd.CAS(shareddata.Tree); ok {
			time.Sleep(300 * time.Millisecond) // every worker past its first tick
			return
		}
	}
	t.Fatal("no tree was published in 10s")
}

// hammer sends requests for reviews from 8 clients for d and counts the
// answers that are 200 and those that are not, with the first failure.
func hammer(t *testing.T, url string, d time.Duration) (ok, bad int64, first string) {
	var wg sync.WaitGroup
	var once sync.Once
	var nOK, nBad atomic.Int64
	stop := time.Now().Add(d)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				req, _ := http.NewRequest(http.MethodGet, url+"/", nil)
				req.Host = "reviews"
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					nOK.Add(1)
					continue
				}
				nBad.Add(1)
				once.Do(func() { first = fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(body))) })
			}
		}()
	}
	wg.Wait()
	return nOK.Load(), nBad.Load(), first
}

// The allowlist still bounds what is forwarded: an endpoint of a tree
// recentTrees trees old is refused, one of the trees after it allowed.
func TestTreeAllowlistForgets(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the filter")
	}
	h, err := host.New(context.Background(), wasmtest.Bytes(t, "../../filter"), host.Options{
		PluginConfig: []byte(`{"topology":{"services":[]}}`), PluginName: "loctree", RootID: "loctree", ManualTicks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	allow := &TreeAllowlist{Shared: h.Shared()}
	addr := func(g int) netip.AddrPort { return netip.MustParseAddrPort(fmt.Sprintf("127.0.9.%d:80", g)) }
	for g := 1; g <= recentTrees+1; g++ {
		tree, err := shared.Build(&shared.Topology{Services: []shared.ServiceSpec{{Name: "reviews",
			Endpoints: []shared.EndpointSpec{{Address: addr(g).String()}}}}}, shared.BuildOptions{Generation: uint64(g)})
		if err != nil {
			t.Fatal(err)
		}
		h.Shared().Set(shareddata.Tree, tree.Bytes(), 0)
		if !allow.Allowed(addr(g)) {
			t.Fatalf("tree %d: its own endpoint refused", g)
		}
	}
	if allow.Allowed(addr(1)) {
		t.Errorf("an endpoint of the tree %d trees old is allowed", recentTrees)
	}
	for g := 2; g <= recentTrees+1; g++ {
		if !allow.Allowed(addr(g)) {
			t.Errorf("an endpoint of tree %d (one of the last %d) refused", g, recentTrees)
		}
	}
	if allow.Allowed(netip.MustParseAddrPort("127.0.0.1:1")) {
		t.Error("an address of no tree allowed")
	}
}

// docs/WASM.md says how many trees before the current one wasm serve still
// forwards to.
func TestDocsRecentTrees(t *testing.T) {
	doc, err := os.ReadFile("../../docs/WASM.md")
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("endpoints of the %d trees\npublished before the current one", recentTrees-1)
	if !strings.Contains(strings.Join(strings.Fields(string(doc)), " "), strings.Join(strings.Fields(want), " ")) {
		t.Errorf("docs/WASM.md does not say %q (recentTrees is %d)", want, recentTrees)
	}
}
