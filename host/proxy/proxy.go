// Package proxy is `loctree wasm serve`: a small HTTP reverse proxy that runs a proxy-wasm
// filter on every request in the wazero host and forwards the request to the
// endpoint the filter wrote into a header (Envoy's OverrideHost contract),
// but only to addresses of the current locality tree (or of one a worker
// may still hold while the tree changes).
package proxy

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loctree/loctree/host"
)

// Proxy is an http.Handler; see the package documentation.
type Proxy struct {
	Pool *host.Pool
	// Header is the header the filter writes ("ip:port[,ip:port...]" or
	// base64 of "ip:port").
	Header string
	// Allowed says whether an address may be forwarded to.
	Allowed func(netip.AddrPort) bool
	// Client forwards requests; nil means a client of the package's own
	// that keeps up to MaxIdlePerEndpoint idle connections per endpoint.
	Client *http.Client
	// Timeout bounds one request end to end; 0 means 30s.
	Timeout time.Duration
	// MaxBuffered bounds the request bodies held by all requests at once,
	// and the response bodies likewise; 0 means 64 MiB, and it is at least
	// 16 MiB, the largest body. Requests past it wait (until Timeout, then
	// 503).
	MaxBuffered int64
	Log         *slog.Logger
	// Explain, if set, says why the filter wrote no endpoint for a request
	// (no tree yet, an unknown host); its answer, unless "", is the 502's
	// reason.
	Explain func(host.Headers) string

	budgets    [2]*bodyBudget // request bodies, response bodies
	budgetOnce sync.Once
}

// budget is the body budget of requests (0) or responses (1). Separate
// budgets keep a request that holds its body and waits for room for the
// response from blocking the responses that would free that room.
func (p *Proxy) budget(dir int) *bodyBudget {
	p.budgetOnce.Do(func() {
		max := max(cmp.Or(p.MaxBuffered, defaultMaxBuffered), maxBody)
		p.budgets = [2]*bodyBudget{newBodyBudget(max), newBodyBudget(max)}
	})
	return p.budgets[dir]
}

const (
	requestBodies  = 0
	responseBodies = 1
)

// ServeHTTP runs the filter, then forwards or answers locally.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), p.timeout())
	defer cancel()
	body, n, err := readBody(ctx, r.Body, r.ContentLength, p.budget(requestBodies))
	defer p.budget(requestBodies).give(n)
	if err != nil {
		p.bodyError(w, err)
		return
	}
	held := new(atomic.Int64) // response body bytes, given back at the end
	defer func() { p.budget(responseBodies).give(held.Load()) }()
	p.run(context.WithValue(ctx, heldKey{}, held), w, r, body)
}

// run passes the request through a VM of the pool and answers.
func (p *Proxy) run(ctx context.Context, w http.ResponseWriter, r *http.Request, body []byte) {
	vm, err := p.Pool.Pick(ctx)
	if err != nil {
		p.fail(w, http.StatusServiceUnavailable, "wasm plugin unavailable", err)
		return
	}
	res, err := p.do(ctx, vm, r, body)
	if errors.Is(err, errNotInTree) && vm.Tick() == nil {
		// The worker holds a tree older than any Allowed still knows: its
		// tick picks up the published one (the loctree filter's OnTick),
		// as its own timer would have, and the request is filtered again.
		res, err = p.do(ctx, vm, r, body)
	}
	switch {
	case res != nil && res.Local != nil:
		writeLocal(w, res.Local)
	case errors.Is(err, errBadGateway):
		p.fail(w, http.StatusBadGateway, "bad gateway", err)
	case err != nil:
		p.fail(w, http.StatusInternalServerError, "wasm plugin failed", err)
	default:
		writeResponse(w, res.Response)
	}
}

// do runs the request through the filter of vm and forwards it.
func (p *Proxy) do(ctx context.Context, vm *host.VM, r *http.Request, body []byte) (*host.Result, error) {
	props := host.NewProperties()
	props.SetString([]string{"source", "address"}, r.RemoteAddr)
	return vm.Do(ctx, &host.Request{Headers: requestHeaders(r), Body: body, Properties: props}, p.forward)
}

// heldKey is the context key of a request's held response body bytes.
type heldKey struct{}

// hold charges n response body bytes to the request of ctx, given back
// when it ends; without one (a caller other than ServeHTTP) at once.
func (p *Proxy) hold(ctx context.Context, n int64) {
	if held, ok := ctx.Value(heldKey{}).(*atomic.Int64); ok {
		held.Add(n)
		return
	}
	p.budget(responseBodies).give(n)
}

// bodyError answers a request whose body could not be read.
func (p *Proxy) bodyError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, errBodyTooLarge):
		http.Error(w, "request "+err.Error(), http.StatusRequestEntityTooLarge)
	case errors.Is(err, errBusy):
		w.Header().Set("Retry-After", "1")
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
	default:
		http.Error(w, "read request body: "+err.Error(), http.StatusBadRequest)
	}
}

func (p *Proxy) timeout() time.Duration {
	if p.Timeout > 0 {
		return p.Timeout
	}
	return 30 * time.Second
}

func (p *Proxy) fail(w http.ResponseWriter, status int, msg string, err error) {
	if p.Log != nil {
		p.Log.Warn(msg, "err", err)
	}
	http.Error(w, msg+": "+err.Error(), status)
}

// errBadGateway: the request cannot be forwarded (502): the filter named no
// usable endpoint, or the endpoint did not answer.
var errBadGateway = errors.New("cannot forward")

// errNotInTree: the filter named an address Allowed refuses.
var errNotInTree = errors.New("is not an endpoint of the current tree")

// forward sends the filtered request to the endpoint named in the header.
func (p *Proxy) forward(ctx context.Context, req *host.Request) (*host.Response, error) {
	v, _ := req.Headers.Get(p.Header)
	if v == "" && p.Explain != nil {
		if why := p.Explain(req.Headers); why != "" {
			return nil, fmt.Errorf("%w: %s", errBadGateway, why)
		}
	}
	ap, err := p.target(v)
	if err != nil {
		return nil, err
	}
	method, _ := req.Headers.Get(":method")
	path, _ := req.Headers.Get(":path")
	out, err := http.NewRequestWithContext(ctx, method, "http://"+ap.String()+path, bytes.NewReader(req.Body))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errBadGateway, err)
	}
	for _, kv := range req.Headers {
		if !strings.HasPrefix(kv[0], ":") {
			out.Header.Add(kv[0], kv[1])
		}
	}
	out.Host, _ = req.Headers.Get(":authority")
	return p.roundTrip(out)
}

// target parses the header's first endpoint and checks it is allowed.
func (p *Proxy) target(v string) (netip.AddrPort, error) {
	first, _, _ := strings.Cut(v, ",")
	first = strings.TrimSpace(first)
	ap, err := netip.ParseAddrPort(first)
	if err != nil {
		if dec, derr := base64.StdEncoding.DecodeString(first); derr == nil {
			ap, err = netip.ParseAddrPort(string(dec))
		}
	}
	if err != nil {
		return ap, fmt.Errorf("%w: header %s = %q names no endpoint", errBadGateway, p.Header, v)
	}
	if p.Allowed == nil || !p.Allowed(ap) {
		return ap, fmt.Errorf("%w: %s %w", errBadGateway, ap, errNotInTree)
	}
	return ap, nil
}

// MaxIdlePerEndpoint is how many idle connections the default client keeps
// to each endpoint. net/http's default keeps 2, so a proxy forwarding more
// than two requests at once to an endpoint would open and close a
// connection for nearly every request past them; Envoy keeps its upstream
// connections in a pool per host, reused, whatever the concurrency.
const MaxIdlePerEndpoint = 128

// defaultClient is the client of proxies without one: net/http's default
// transport (proxy from the environment, dial and TLS timeouts, HTTP/2),
// with MaxIdlePerEndpoint.
var defaultClient = sync.OnceValue(func() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = MaxIdlePerEndpoint
	t.MaxIdleConns = 4096 // across all endpoints, beside MaxIdlePerEndpoint each
	return &http.Client{Transport: t}
})

func (p *Proxy) roundTrip(out *http.Request) (*host.Response, error) {
	client := p.Client
	if client == nil {
		client = defaultClient()
	}
	resp, err := client.Do(out)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // "dial tcp ADDR: connect: connection refused", not the URL again
		}
		return nil, fmt.Errorf("%w: endpoint %s: %w", errBadGateway, out.URL.Host, err)
	}
	defer resp.Body.Close()
	body, n, err := readBody(out.Context(), resp.Body, resp.ContentLength, p.budget(responseBodies))
	p.hold(out.Context(), n)
	if err != nil {
		return nil, fmt.Errorf("%w: upstream response %w", errBadGateway, err)
	}
	h := host.Headers{{":status", strconv.Itoa(resp.StatusCode)}}
	for k, vs := range resp.Header {
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	return &host.Response{Headers: h, Body: body}, nil
}

func requestHeaders(r *http.Request) host.Headers {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	h := host.Headers{{":method", r.Method}, {":path", r.URL.RequestURI()}, {":authority", r.Host}, {":scheme", scheme}}
	for k, vs := range r.Header {
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	return h
}

func writeLocal(w http.ResponseWriter, l *host.LocalResponse) {
	for _, kv := range l.Headers {
		w.Header().Add(kv[0], kv[1])
	}
	w.WriteHeader(l.Status)
	w.Write(l.Body)
}

func writeResponse(w http.ResponseWriter, r *host.Response) {
	status := http.StatusOK
	for _, kv := range r.Headers {
		if kv[0] == ":status" {
			status, _ = strconv.Atoi(kv[1])
			continue
		}
		if kv[0] != "content-length" {
			w.Header().Add(kv[0], kv[1])
		}
	}
	w.WriteHeader(status)
	w.Write(r.Body)
}
