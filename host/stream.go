package host

import (
	"context"
	"fmt"

	"github.com/tetratelabs/wazero/api"
)

// LocalResponse is a response the plugin sent with proxy_send_local_response.
type LocalResponse struct {
	Status  int
	Details string
	Body    []byte
	Headers Headers
	GRPC    int32 // -1 when not a gRPC status
}

// Stream is one HTTP request/response through the plugin on one VM. Its
// methods run the callbacks in Envoy's order; call Close at the end.
type Stream struct {
	vm    *VM
	id    uint32
	props *Properties

	reqHeaders, reqTrailers   Headers
	respHeaders, respTrailers Headers
	reqBody, respBody         []byte

	// live[t]: header map t (request headers, request trailers, response
	// headers, response trailers) is there for the plugin: from its
	// callback until the filter continues past it.
	live [4]bool

	pending *LocalResponse
	local   *LocalResponse
	resumed chan struct{}
	closed  bool
}

// NewStream creates a stream context (proxy_on_context_create(id, root)).
// props are the stream's own properties (xds.cluster_name, source.address,
// ...); they shadow the host's.
func (vm *VM) NewStream(props *Properties) (*Stream, error) {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	if vm.broken != nil {
		return nil, vm.broken
	}
	if vm.draining {
		return nil, fmt.Errorf("vm %d: shutting down: %w", vm.id, ErrVMBroken)
	}
	vm.nextID++
	s := &Stream{vm: vm, id: vm.nextID, props: props}
	vm.streams[s.id] = s
	vm.effective = s.id
	ctx := vm.runCtx
	if _, err := vm.call(ctx, vm.fn.contextCreate, uint64(s.id), uint64(vm.rootID)); err != nil {
		s.finish()
		return nil, err
	}
	return s, nil
}

// ID returns the stream's context id.
func (s *Stream) ID() uint32 { return s.id }

// LocalResponse returns the local response the plugin sent, or nil.
func (s *Stream) LocalResponse() *LocalResponse {
	s.vm.mu.Lock()
	defer s.vm.mu.Unlock()
	return s.local
}

// RequestHeaders runs proxy_on_request_headers with h (copied; read the
// result back with Headers).
func (s *Stream) RequestHeaders(h Headers, endOfStream bool) (Action, error) {
	return s.phase(phaseRequestHeaders, h, nil, endOfStream)
}

// RequestBody runs proxy_on_request_body with body.
func (s *Stream) RequestBody(body []byte, endOfStream bool) (Action, error) {
	return s.phase(phaseRequestBody, nil, body, endOfStream)
}

// RequestTrailers runs proxy_on_request_trailers.
func (s *Stream) RequestTrailers(t Headers) (Action, error) {
	return s.phase(phaseRequestTrailers, t, nil, true)
}

// ResponseHeaders runs proxy_on_response_headers.
func (s *Stream) ResponseHeaders(h Headers, endOfStream bool) (Action, error) {
	return s.phase(phaseResponseHeaders, h, nil, endOfStream)
}

// ResponseBody runs proxy_on_response_body.
func (s *Stream) ResponseBody(body []byte, endOfStream bool) (Action, error) {
	return s.phase(phaseResponseBody, nil, body, endOfStream)
}

// ResponseTrailers runs proxy_on_response_trailers.
func (s *Stream) ResponseTrailers(t Headers) (Action, error) {
	return s.phase(phaseResponseTrailers, t, nil, true)
}

type phaseKind int

const (
	phaseRequestHeaders phaseKind = iota
	phaseRequestBody
	phaseRequestTrailers
	phaseResponseHeaders
	phaseResponseBody
	phaseResponseTrailers
)

// enterPhase stores the phase's data and returns its callback and size
// argument. vm.mu is held.
func (s *Stream) enterPhase(k phaseKind, h Headers, body []byte) (api.Function, int) {
	fn := &s.vm.fn
	switch k {
	case phaseRequestHeaders:
		s.reqHeaders, s.live[mapRequestHeaders] = h.lowered(), true
		return fn.requestHeaders, len(h)
	case phaseRequestBody:
		s.reqBody = body
		return fn.requestBody, len(body)
	case phaseRequestTrailers:
		s.reqTrailers, s.live[mapRequestTrailers] = h.lowered(), true
		return fn.requestTrailers, len(h)
	case phaseResponseHeaders:
		s.respHeaders, s.live[mapResponseHeaders] = h.lowered(), true
		return fn.responseHeaders, len(h)
	case phaseResponseBody:
		s.respBody = body
		return fn.responseBody, len(body)
	}
	s.respTrailers, s.live[mapResponseTrailers] = h.lowered(), true
	return fn.responseTrailers, len(h)
}

func (s *Stream) phase(k phaseKind, h Headers, body []byte, endOfStream bool) (Action, error) {
	vm := s.vm
	vm.mu.Lock()
	defer vm.mu.Unlock()
	if s.closed {
		return ActionContinue, ErrStreamDone
	}
	vm.effective = s.id
	f, n := s.enterPhase(k, h, body)
	ctx := vm.runCtx // callbacks after start: no timer or cancellation per call (see watch)
	var r uint64
	var err error
	if k == phaseRequestTrailers || k == phaseResponseTrailers || vm.h.abi == abi010 && (k == phaseRequestHeaders || k == phaseResponseHeaders) {
		r, err = vm.call(ctx, f, uint64(s.id), uint64(n))
	} else {
		r, err = vm.call(ctx, f, uint64(s.id), uint64(n), b2u(endOfStream))
	}
	vm.afterCall()
	if err != nil {
		return ActionContinue, err
	}
	if s.local != nil {
		return ActionPause, nil
	}
	if Action(uint32(r)) == ActionContinue {
		s.continued(k)
	}
	return Action(uint32(r)), nil
}

// continued drops the map of phase k: Envoy forgets a header map once the
// filter continues past it (Context::decodeHeaders and friends).
func (s *Stream) continued(k phaseKind) {
	switch k {
	case phaseRequestHeaders:
		s.live[mapRequestHeaders] = false
	case phaseRequestTrailers:
		s.live[mapRequestTrailers] = false
	case phaseResponseHeaders:
		s.live[mapResponseHeaders] = false
	case phaseResponseTrailers:
		s.live[mapResponseTrailers] = false
	}
}

// Wait blocks after a phase returned ActionPause until the plugin resumes
// the stream (proxy_continue_stream) or sends a local response, or until
// ctx ends.
func (s *Stream) Wait(ctx context.Context) error {
	s.vm.mu.Lock()
	resumed := s.resumedChan()
	s.vm.mu.Unlock()
	select {
	case <-resumed:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for paused stream %d: %w", s.id, ctx.Err())
	}
}

// resumedChan is the channel a paused stream's waiter reads, made on first
// use (most streams never pause). vm.mu is held.
func (s *Stream) resumedChan() chan struct{} {
	if s.resumed == nil {
		s.resumed = make(chan struct{}, 1)
	}
	return s.resumed
}

// Headers returns copies of the request and response headers as the plugin
// left them.
func (s *Stream) Headers() (request, response Headers) {
	s.vm.mu.Lock()
	defer s.vm.mu.Unlock()
	return s.reqHeaders.Clone(), s.respHeaders.Clone()
}

// Bodies returns the request and response bodies as the plugin left them.
func (s *Stream) Bodies() (request, response []byte) {
	s.vm.mu.Lock()
	defer s.vm.mu.Unlock()
	return s.reqBody, s.respBody
}

// Close ends the stream: proxy_on_log, proxy_on_done, proxy_on_delete.
// A stream's proxy_on_done answer does not hold proxy_on_delete back
// (cpp-host src/context.cc:242-248, ContextBase::destroy ignores it); only
// a root context waits for proxy_done.
func (s *Stream) Close() error {
	vm := s.vm
	vm.mu.Lock()
	defer vm.mu.Unlock()
	if s.closed {
		return nil
	}
	vm.effective = s.id
	defer s.finish()
	vm.logging = true
	_, err := vm.call(vm.runCtx, vm.fn.log, uint64(s.id))
	vm.logging = false
	if err != nil {
		return err
	}
	return s.destroy()
}

// destroy runs proxy_on_done and proxy_on_delete. vm.mu is held.
func (s *Stream) destroy() error {
	vm := s.vm
	if _, err := vm.call(vm.runCtx, vm.fn.done, uint64(s.id)); err != nil {
		return err
	}
	_, err := vm.call(vm.runCtx, vm.fn.delete, uint64(s.id))
	return err
}

// Destroy ends the stream without access logging: proxy_on_done, then
// proxy_on_delete, no proxy_on_log, as Envoy's Context::onDestroy does
// (source/extensions/common/wasm/context.cc; cpp-host
// src/context.cc:242-248, ContextBase::destroy); proxy_on_log comes from
// the access-log path, which a stream may never reach.
func (s *Stream) Destroy() error {
	vm := s.vm
	vm.mu.Lock()
	defer vm.mu.Unlock()
	if s.closed {
		return nil
	}
	vm.effective = s.id
	defer s.finish()
	return s.destroy()
}

// finish forgets the stream. vm.mu is held.
func (s *Stream) finish() {
	s.closed = true
	delete(s.vm.streams, s.id)
}

// applyDeferred makes a local response sent during the last callback take
// effect. vm.mu is held.
func (s *Stream) applyDeferred() {
	if s.pending == nil || s.local != nil {
		return
	}
	s.local, s.pending = s.pending, nil
	s.signal()
}

func (s *Stream) signal() {
	select {
	case s.resumedChan() <- struct{}{}:
	default:
	}
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
