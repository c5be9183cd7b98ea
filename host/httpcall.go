package host

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// callResponse is the HTTP call response visible during
// proxy_on_http_call_response.
type callResponse struct {
	headers, trailers Headers
	body              []byte
	status            int
	message           string
}

type callRequest struct {
	id       uint32
	base     string
	headers  Headers
	body     []byte
	trailers Headers
	timeout  time.Duration
}

func hcHTTPCall(vm *VM, st []uint64) Status {
	upstream, ok1 := vm.readString(st[0], st[1])
	hb, ok2 := vm.read(st[2], st[3])
	body, ok3 := vm.read(st[4], st[5])
	tb, ok4 := vm.read(st[6], st[7])
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return StatusInvalidMemoryAccess
	}
	headers, trailers := toPairs(hb).lowered(), toPairs(tb) // cpp-host src/exports.cc:522-523
	if !vm.writeU32(st[9], 0) {                             // cpp-host checks the token's memory first (src/exports.cc:525-529)
		return StatusInvalidMemoryAccess
	}
	base, known := vm.h.opts.Upstreams[upstream]
	if !known || !hasPseudo(headers) || int32(st[8]) < 0 {
		vm.h.log.Warn("proxy_http_call rejected", "vm", vm.id, "upstream", upstream, "known", known)
		return StatusBadArgument
	}
	vm.nextCall += callIDStep
	req := &callRequest{id: vm.nextCall, base: base, headers: headers, body: bytes.Clone(body),
		trailers: trailers, timeout: time.Duration(uint32(st[8])) * time.Millisecond}
	vm.writeU32(st[9], req.id)
	vm.calls.Add(1)
	go vm.dispatch(req)
	return StatusOK
}

func hasPseudo(h Headers) bool {
	for _, k := range []string{":method", ":path", ":authority"} {
		if v, ok := h.Get(k); !ok || v == "" {
			return false
		}
	}
	return true
}

// dispatch sends the call and delivers the answer to the root context.
func (vm *VM) dispatch(req *callRequest) {
	defer vm.calls.Done()
	resp := vm.h.send(req)
	vm.mu.Lock()
	defer vm.mu.Unlock()
	if vm.broken != nil {
		return
	}
	ctx := vm.runCtx
	vm.callResp, vm.effective = resp, vm.rootID
	n := len(resp.headers)
	vm.call(ctx, vm.fn.httpCallResponse, uint64(vm.rootID), uint64(req.id),
		uint64(n), uint64(len(resp.body)), uint64(len(resp.trailers)))
	vm.callResp = nil
	vm.afterCall()
}

// callIDStep: HTTP call tokens are 4, 8, 12, ... (cpp-host
// include/proxy-wasm/wasm.h:173-191, nextHttpCallId; the low two bits name
// the callout type, 0 for HTTP).
const callIDStep = 4

// send performs one HTTP call. A timeout of 0 means none (Envoy
// Context::httpCall sets no timeout then). Failures come back as Envoy's
// async client answers them: see failure.
func (h *Host) send(req *callRequest) *callResponse {
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	if req.timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, req.timeout)
	}
	defer cancel()
	base := req.base
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	method, _ := req.headers.Get(":method")
	path, _ := req.headers.Get(":path")
	authority, _ := req.headers.Get(":authority")
	hreq, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(base, "/")+path, bytes.NewReader(req.body))
	if err != nil {
		return failure(err)
	}
	hreq.Host = authority
	for _, kv := range req.headers {
		if !strings.HasPrefix(kv[0], ":") {
			hreq.Header.Add(kv[0], kv[1])
		}
	}
	return h.roundTrip(hreq)
}

func (h *Host) roundTrip(hreq *http.Request) *callResponse {
	resp, err := h.client.Do(hreq)
	if err != nil {
		h.log.Debug("proxy_http_call failed", "url", hreq.URL.String(), "err", err) // the plugin gets the failure and reports it
		return failure(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return failure(err)
	}
	out := &callResponse{body: body, status: resp.StatusCode, message: resp.Status}
	out.headers = Headers{{":status", strconv.Itoa(resp.StatusCode)}}
	for _, k := range slices.Sorted(maps.Keys(resp.Header)) {
		for _, v := range resp.Header[k] {
			out.headers.Add(k, v)
		}
	}
	for k, vs := range resp.Trailer {
		for _, v := range vs {
			out.trailers.Add(k, v)
		}
	}
	return out
}

func hcGetStatus(vm *VM, st []uint64) Status {
	if vm.callResp == nil {
		return StatusNotFound
	}
	if !vm.writeU32(st[0], uint32(vm.callResp.status)) {
		return StatusInvalidMemoryAccess
	}
	return vm.returnBytes([]byte(vm.callResp.message), st[1], st[2])
}

// failure is the response Envoy's async client delivers when the upstream
// cannot be reached or does not answer in time: its router's local reply,
// 504 "upstream request timeout" on a timeout, else 503 "upstream connect
// error or disconnect/reset before headers" (Envoy
// source/common/router/router.cc, Filter::onUpstreamReset and
// onResponseTimeout), with :status, content-length and content-type
// headers, not an empty answer.
func failure(err error) *callResponse {
	status, body := 503, "upstream connect error or disconnect/reset before headers. reset reason: connection failure"
	if errors.Is(err, context.DeadlineExceeded) {
		status, body = 504, "upstream request timeout"
	}
	return &callResponse{status: status, message: http.StatusText(status), body: []byte(body), headers: Headers{
		{":status", strconv.Itoa(status)}, {"content-length", strconv.Itoa(len(body))}, {"content-type", "text/plain"}}}
}
