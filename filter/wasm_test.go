package main

import (
	"context"
	"errors"
	"flag"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loctree/loctree/host"
	"github.com/loctree/loctree/internal/testing/wasmtest"
	"github.com/tetratelabs/wazero"
)

var wasmPath = flag.String("wasm", "", "use this prebuilt loctree.wasm instead of building one")

var (
	prebuilt  = sync.OnceValues(func() ([]byte, error) { return os.ReadFile(*wasmPath) })
	wasmCache = wazero.NewCompilationCache()
)

// loctreeWasm returns the module given by -wasm, or the filter built with
// the standard Go compiler as the Makefile does (once per test binary).
func loctreeWasm(t testing.TB) []byte {
	t.Helper()
	if *wasmPath == "" {
		return wasmtest.Bytes(t, ".")
	}
	b, err := prebuilt()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newHost starts a host running the real filter.
func newHost(t testing.TB, config string, opts host.Options) *host.Host {
	t.Helper()
	opts.PluginConfig, opts.Cache = []byte(config), wasmCache
	h, err := host.New(context.Background(), loctreeWasm(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	return h
}

func properties(m map[string]string) *host.Properties {
	p := host.NewProperties()
	for path, v := range m {
		p.SetString(host.SplitPath(path), v)
	}
	return p
}

// TestFilterWasm runs the same cases as TestFilterNative against the built
// .wasm in the wazero host.
func TestFilterWasm(t *testing.T) {
	ctx := context.Background()
	for _, c := range filterCases {
		t.Run(c.name, func(t *testing.T) {
			h := newHost(t, c.config, host.Options{Properties: properties(c.props)})
			vm, err := h.NewVM(ctx)
			started := err == nil
			if err != nil && !errors.Is(err, host.ErrPluginStart) {
				t.Fatal(err)
			}
			var (
				value  string
				has    bool
				status int
			)
			if started {
				defer vm.Close()
				res, err := vm.Do(ctx, &host.Request{Headers: host.Headers(c.headers)}, nil)
				if err != nil {
					t.Fatal(err)
				}
				value, has = res.Request.Headers.Get(c.header())
				if res.Local != nil {
					status = res.Local.Status
				}
			}
			var logs []string
			for _, l := range h.Logs() {
				logs = append(logs, l.Message)
			}
			if problem := c.check(started, value, has, status, logs); problem != "" {
				t.Error(problem)
			}
		})
	}
}

// TestBadConfigHostSurvives: a bad plugin configuration fails plugin start
// (a pool cannot start) with one clear critical line; the host process and
// other plugins keep working.
func TestBadConfigHostSurvives(t *testing.T) {
	ctx := context.Background()
	bad := newHost(t, `{"tree":{"cluster":""}}`, host.Options{})
	if _, err := bad.NewPool(ctx, 2); !errors.Is(err, host.ErrPluginStart) {
		t.Fatalf("pool with a bad configuration: %v", err)
	}
	if n := countLogs(bad, "loctree: plugin start failed: invalid loctree plugin configuration: tree.cluster: required"); n != 1 {
		t.Fatalf("%d clear log lines, want 1: %v", n, bad.Logs())
	}
	// Rejected by the configuration canary, before any worker VM starts
	// (cpp-host src/wasm.cc:555-565).
	if l := bad.Logs(); l[len(l)-1].VM != -1 {
		t.Fatalf("plugin start failed in VM %d, want the canary (-1)", l[len(l)-1].VM)
	}
	good := newHost(t, inline(`,"locality":{"region":"us-west","zone":"us-west-2a"}`), host.Options{})
	vm, err := good.NewVM(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer vm.Close()
	if got := pickOn(t, vm, "ratings"); got != "127.0.3.2:9080" {
		t.Fatalf("good plugin after a bad one picked %q", got)
	}
}

// leastRequestStreams starts a VM whose service lr has two least_request
// endpoints and returns a function that opens a stream to lr and says where
// the filter sent it (streamsTo).
func leastRequestStreams(t *testing.T) func() (*host.Stream, string) {
	cfg := `{"topology":{"services":[{"name":"lr","policy":"least_request","endpoints":[
	  {"address":"127.0.4.1:80","locality":{"region":"r"}},{"address":"127.0.4.2:80","locality":{"region":"r"}}]}]},
	  "locality":{"region":"r"}}`
	return streamsTo(t, cfg, "lr")
}

// streamsTo starts a VM with the plugin configuration cfg and returns a
// function that opens a stream to service and says where the filter sent
// it. The VM closes when the test ends.
func streamsTo(t *testing.T, cfg, service string) func() (*host.Stream, string) {
	vm, err := newHost(t, cfg, host.Options{}).NewVM(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { vm.Close() })
	return func() (*host.Stream, string) {
		t.Helper()
		s, err := vm.NewStream(nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.RequestHeaders(host.Headers(req(service)), true); err != nil {
			t.Fatal(err)
		}
		hs, _ := s.Headers()
		v, _ := hs.Get(defaultHeader)
		return s, v
	}
}

// leastRequestStreamsToBusy is how many of the streams least_request sends
// to the busy endpoint (one stream held open on it) while each other stream
// is ended by end. Envoy's two independent draws send a stream there 1/4 of
// the time (unweightedHostPickNChoices, least_request_lb.cc at
// 3b0bcb125b34); if ended streams kept their count, the other endpoint
// would soon have more in flight and the busy one would get 3/4.
const leastRequestStreamsToBusy = 100

// TestLeastRequestInFlight: least_request counts open streams in the VM and
// releases them when the stream ends.
func TestLeastRequestInFlight(t *testing.T) {
	open := leastRequestStreams(t)
	a, busy := open() // stays open: one in flight
	toBusy := 0
	for range leastRequestStreamsToBusy {
		b, other := open()
		if other == busy {
			toBusy++
		}
		b.Close() // released: the next stream again prefers the idle one
	}
	a.Close()
	if toBusy > leastRequestStreamsToBusy/2 {
		t.Fatalf("%d of %d streams sent to the busy endpoint %s (Envoy's P2C: about 1/4)", toBusy, leastRequestStreamsToBusy, busy)
	}
}

// TestSlowUpstreamKeepsVM: the time limit bounds each callback, not the
// stream, so a slow upstream does not break the VM.
func TestSlowUpstreamKeepsVM(t *testing.T) {
	h := newHost(t, inline(`,"locality":{"region":"us-east"}`), host.Options{CallTimeout: 300 * time.Millisecond})
	vm, err := h.NewVM(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer vm.Close()
	slow := func(ctx context.Context, r *host.Request) (*host.Response, error) {
		time.Sleep(600 * time.Millisecond)
		return &host.Response{Headers: host.Headers{{":status", "200"}}, Body: []byte("ok")}, nil
	}
	res, err := vm.Do(context.Background(), &host.Request{Headers: host.Headers(req("reviews"))}, slow)
	if err != nil || res.Response == nil || string(res.Response.Body) != "ok" || vm.Err() != nil {
		t.Fatalf("slow upstream: %v %+v %v", err, res, vm.Err())
	}
}

// TestHostCloseStopsVMs: closing the host ends every VM's timer and
// watchdog goroutines.
func TestHostCloseStopsVMs(t *testing.T) {
	settle := func(want int) int { // VMs of earlier tests may still be winding down
		deadline := time.Now().Add(5 * time.Second)
		for vmGoroutines() != want && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		return vmGoroutines()
	}
	if n := settle(0); n != 0 {
		t.Fatalf("%d VM goroutines before the test", n)
	}
	h, err := host.New(context.Background(), loctreeWasm(t), host.Options{PluginConfig: []byte(inline("")), Cache: wasmCache, CallTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.NewPool(context.Background(), 3); err != nil {
		t.Fatal(err)
	}
	if n := vmGoroutines(); n != 6 {
		t.Fatalf("%d tick and watchdog goroutines for 3 VMs, want 6", n)
	}
	h.Close(context.Background())
	if n := settle(0); n != 0 {
		t.Fatalf("%d VM goroutines left after Close", n)
	}
}

// vmGoroutines counts goroutines running a VM's tick loop or watchdog.
func vmGoroutines() int {
	buf := make([]byte, 1<<20)
	n := 0
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "host.(*VM).watch") || strings.Contains(g, "host.(*VM).setTick") {
			n++
		}
	}
	return n
}

// TestLeastRequestReleasedOnDelete: a stream Envoy destroys without access
// logging (proxy_on_done and proxy_on_delete, no proxy_on_log: cpp-host
// src/context.cc:242-248) still releases its in-flight count.
func TestLeastRequestReleasedOnDelete(t *testing.T) {
	open := leastRequestStreams(t)
	a, busy := open() // stays open: one in flight on busy
	defer a.Close()
	toBusy := 0
	for range leastRequestStreamsToBusy {
		s, got := open()
		if got == busy { // 1/4 of the time, unless a reset leaked its count
			toBusy++
		}
		if err := s.Destroy(); err != nil {
			t.Fatal(err)
		}
	}
	if toBusy > leastRequestStreamsToBusy/2 {
		t.Fatalf("%d of %d streams sent to the busy endpoint %s: a reset stream kept its count", toBusy, leastRequestStreamsToBusy, busy)
	}
}

// TestBadConfigsFailPluginStart: every bad configuration fails plugin start
// (proxy_on_configure returns false) with one critical log line, which the
// host's error carries; none traps the VM.
func TestBadConfigsFailPluginStart(t *testing.T) {
	for _, cfg := range []string{
		``, `null`, `not json`, `[]`, `{"tree":{"cluster":""}}`, `{"tree":{"cluster":"a","path":"x"}}`,
		`{"topology":{"services":[{"name":"a","endpoints":[{"address":"bad"}]}]}}`,
		`{"topology":{"services":[]},"tree":{"cluster":"a"}}`, inline(`,"fallbacks":99`),
		inline(`,"header_format":"hex"`), inline(`,"unknown":1`), `{"topology":{"services":[{"name":""}]}}`,
	} {
		h := newHost(t, cfg, host.Options{})
		_, err := h.NewVM(context.Background())
		if !errors.Is(err, host.ErrPluginStart) || err == nil || !strings.Contains(err.Error(), "the plugin logged: loctree: plugin start failed: ") {
			t.Errorf("config %q: %v, want ErrPluginStart with the plugin's reason", cfg, err)
		}
		if n := countLogs(h, "loctree: plugin start failed: "); n != 1 {
			t.Errorf("config %q: %d plugin-start log lines, want 1: %v", cfg, n, h.Logs())
		}
	}
}
