package demo

import (
	"context"

	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/loctree/loctree/filter/shareddata"
	"github.com/loctree/loctree/host"
	wasmproxy "github.com/loctree/loctree/host/proxy"
	"github.com/loctree/loctree/shared"
)

// startBackends runs an HTTP server on every backend address that answers
// with its own address. The returned function stops them.
func startBackends() (stop func(), err error) {
	var servers []*http.Server
	stop = func() {
		for _, s := range servers {
			s.Close()
		}
	}
	for _, b := range backends {
		ln, err := net.Listen("tcp", b.addr)
		if err != nil {
			stop()
			return nil, fmt.Errorf("backend %s: %w", b.addr, err)
		}
		self := b.addr
		s := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			io.WriteString(w, self)
		}), ReadHeaderTimeout: 5 * time.Second}
		servers = append(servers, s)
		go s.Serve(ln)
	}
	return stop, nil
}

// proxy is one source's `wasm serve`: the filter in the wazero host, its
// tree fetched from the agent, in front of the backends.
type proxy struct {
	src  Source
	host *host.Host
	pool *host.Pool
	srv  *http.Server
	addr string
}

// startProxy starts src's proxy on 127.0.0.1 (a free port).
func startProxy(ctx context.Context, module []byte, cache wazero.CompilationCache, src Source, agent string, log *slog.Logger) (*proxy, error) {
	h, err := host.New(ctx, module, host.Options{
		PluginConfig: pluginConfig(src, 100), PluginName: "loctree", RootID: "loctree",
		Upstreams: map[string]string{"loctree-agent": agent}, LogLevel: host.LogInfo,
		Logger: log.With("proxy", src.Name), Cache: cache,
	})
	if err != nil {
		return nil, fmt.Errorf("proxy %s: %w", src.Name, err)
	}
	p := &proxy{src: src, host: h}
	if p.pool, err = h.NewPool(ctx, 1); err != nil {
		h.Close(context.Background())
		return nil, fmt.Errorf("proxy %s: %w", src.Name, err)
	}
	allow := &wasmproxy.TreeAllowlist{Shared: h.Shared()}
	handler := &wasmproxy.Proxy{Pool: p.pool, Header: "x-gateway-destination-endpoint", Allowed: allow.Allowed, Log: log}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		p.close()
		return nil, err
	}
	p.addr = ln.Addr().String()
	p.srv = &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	go p.srv.Serve(ln)
	return p, nil
}

// generation is the generation of the tree the proxy's filter published
// (0: none yet).
func (p *proxy) generation() uint64 {
	blob, _, ok := p.host.Shared().Get(shareddata.Tree)
	if !ok {
		return 0
	}
	t, err := shared.Decode(blob)
	if err != nil {
		return 0
	}
	return t.Generation()
}

func (p *proxy) close() {
	if p.srv != nil {
		p.srv.Close()
	}
	if p.pool != nil {
		p.pool.Close()
	}
	p.host.Close(context.Background())
}

// agentGeneration is the generation of the tree the agent serves (0:
// none yet). The agent serves a tree only once it is in the kernel.
func agentGeneration(client *http.Client, agent string) uint64 {
	resp, err := client.Get("http://" + agent + "/v1/tree")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0
	}
	t, err := shared.ReadBlob(resp.Body)
	if err != nil {
		return 0
	}
	d, err := shared.Decode(t)
	if err != nil {
		return 0
	}
	return d.Generation()
}

// askKernel dials the VIP from the source's cgroup (the kernel path picks
// the endpoint at connect) and returns the backend that answered.
func (d *demo) askKernel(src Source) (string, error) {
	var c net.Conn
	var err error
	if merr := d.env.inCgroup(d.env.sourceCg[src.Name], func() {
		c, err = net.DialTimeout("tcp", VIP, time.Second)
	}); merr != nil {
		return "", merr
	}
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(c, "GET / HTTP/1.0\r\nHost: reviews\r\n\r\n"); err != nil {
		return "", err
	}
	b, err := io.ReadAll(io.LimitReader(c, 4096))
	if err != nil {
		return "", err
	}
	_, body, ok := strings.Cut(string(b), "\r\n\r\n")
	if !ok || !strings.HasPrefix(string(b), "HTTP/1.0 200") && !strings.HasPrefix(string(b), "HTTP/1.1 200") {
		return "", fmt.Errorf("unexpected answer %q", b)
	}
	return body, nil
}

// askProxy sends one request for the service through the source's proxy
// and returns the backend that answered.
func askProxy(client *http.Client, p *proxy) (string, error) {
	req, _ := http.NewRequest(http.MethodGet, "http://"+p.addr+"/", nil)
	req.Host = "reviews:9080"
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	return string(b), nil
}
