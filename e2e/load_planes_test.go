package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/loctree/loctree/host"
	wasmproxy "github.com/loctree/loctree/host/proxy"
	"github.com/loctree/loctree/internal/testing/syncbuf"
	"github.com/loctree/loctree/shared"
)

// filterPlane is the L7 plane under load: per client zone, one reverse
// proxy running the real loctree.wasm in the wazero host, as `loctree wasm
// serve` and `loctree demo` run it (host/proxy in front of a pool of VMs,
// forwarding only to endpoints of the tree the filter published), with the
// zone's locality and the topology inline in the plugin configuration.
type filterPlane struct {
	module  []byte
	cache   wazero.CompilationCache
	workers int // VMs per proxy (Envoy worker threads)
}

func (p *filterPlane) name() string { return "filter" }

func (p *filterPlane) start(ctx context.Context, topology []byte, clients []shared.Locality) ([]sendFunc, func(), error) {
	var stops []func()
	var once sync.Once
	stop := func() { // once: a test may stop early and again on its way out
		once.Do(func() {
			for _, s := range stops {
				s()
			}
		})
	}
	var send []sendFunc
	for _, loc := range clients {
		addr, stopProxy, err := p.proxy(ctx, topology, loc)
		if err != nil {
			stop()
			return nil, nil, err
		}
		stops = append(stops, stopProxy)
		send = append(send, httpSender(addr))
	}
	return send, stop, nil
}

// proxy starts one zone's proxy on a free port of 127.0.0.1 and returns
// its address.
func (p *filterPlane) proxy(ctx context.Context, topology []byte, loc shared.Locality) (string, func(), error) {
	cfg, err := json.Marshal(map[string]any{"topology": json.RawMessage(topology), "locality": loc})
	if err != nil {
		return "", nil, err
	}
	var logged syncbuf.Buffer // the filter's warnings: why a configuration is refused
	h, err := host.New(ctx, p.module, host.Options{PluginConfig: cfg, PluginName: "loctree", RootID: "loctree",
		LogLevel: host.LogWarn, Cache: p.cache, OnLog: func(e host.LogEntry) { fmt.Fprintln(&logged, e.Message) }})
	if err != nil {
		return "", nil, fmt.Errorf("proxy for %v: %w\n%s", loc, err, logged.String())
	}
	pool, err := h.NewPool(ctx, p.workers)
	if err != nil {
		h.Close(context.Background())
		return "", nil, fmt.Errorf("proxy for %v: %w\n%s", loc, err, logged.String())
	}
	allow := &wasmproxy.TreeAllowlist{Shared: h.Shared()}
	handler := &wasmproxy.Proxy{Pool: pool, Header: "x-gateway-destination-endpoint", Allowed: allow.Allowed,
		Client: pooledClient()}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		pool.Close()
		h.Close(context.Background())
		return "", nil, err
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	return ln.Addr().String(), func() {
		srv.Close()
		pool.Close()
		h.Close(context.Background())
	}, nil
}

// pooledClient keeps connections open for reuse to every backend, as
// Envoy's connection pools do, so the test measures queueing at the
// backends and not connection setup (net/http keeps 2 idle per host by
// default and would open and close one per request under load).
func pooledClient() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConns: 4096, MaxIdleConnsPerHost: 1024, IdleConnTimeout: time.Minute}}
}

// httpSender sends GET / for the service through the proxy at addr.
func httpSender(addr string) sendFunc {
	client := pooledClient()
	return func(ctx context.Context) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/", nil)
		if err != nil {
			return 0, "", err
		}
		req.Host = loadService
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, resp.Header.Get(backendHeader), nil
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
