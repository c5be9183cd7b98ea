//go:build wasip1

package abi

import (
	"runtime"
	"unsafe"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"
)

// state is the VM's context table. Streams live in a ring indexed by
// context id (ids grow one by one), so a request costs no map operation
// or allocation here; ids that collide with a live stream overflow into a
// map.
var state = struct {
	vm       types.VMContext
	plugins  map[uint32]types.PluginContext
	streams  [streamRing]streamSlot
	overflow map[uint32]types.HttpContext
	callouts map[uint32]callout
	active   uint32
}{
	plugins:  map[uint32]types.PluginContext{},
	overflow: map[uint32]types.HttpContext{},
	callouts: map[uint32]callout{},
}

const streamRing = 1024

type streamSlot struct {
	id uint32
	h  types.HttpContext
}

func putStream(id uint32, h types.HttpContext) {
	s := &state.streams[id%streamRing]
	if s.h == nil {
		s.id, s.h = id, h
		return
	}
	state.overflow[id] = h
}

func getStream(id uint32) types.HttpContext {
	if s := &state.streams[id%streamRing]; s.h != nil && s.id == id {
		return s.h
	}
	if len(state.overflow) == 0 {
		return nil
	}
	return state.overflow[id]
}

func deleteStream(id uint32) {
	if s := &state.streams[id%streamRing]; s.h != nil && s.id == id {
		s.h = nil
		return
	}
	if len(state.overflow) > 0 {
		delete(state.overflow, id)
	}
}

type callout struct {
	ctx uint32
	cb  func(numHeaders, bodySize, numTrailers int)
}

// SetVMContext installs the filter's VM context; call it from init.
func SetVMContext(vm types.VMContext) { state.vm = vm }

// allocs keeps buffers handed to the host alive until the hostcall that
// asked for them has wrapped them in a Go slice.
var allocs [][]byte

// The scratch arena serves host-returned buffers that are consumed within
// the current callback (header values, properties): no garbage per request.
// It is reset whenever the host calls into the module.
var (
	arena     [16 << 10]byte
	arenaOff  uint32
	transient bool
)

// enter marks the start of a callback.
func enter(id uint32) {
	arenaOff, state.active = 0, id
}

//go:wasmexport proxy_abi_version_0_2_1
func proxyABIVersion() {}

//go:wasmexport proxy_on_memory_allocate
func proxyOnMemoryAllocate(size uint32) uint32 {
	if size == 0 {
		size = 1
	}
	if transient && uint64(arenaOff)+uint64(size) <= uint64(len(arena)) {
		p := uint32(uintptr(unsafe.Pointer(&arena[arenaOff])))
		arenaOff += (size + 7) &^ 7
		return p
	}
	b := make([]byte, size)
	allocs = append(allocs, b)
	return uint32(uintptr(unsafe.Pointer(&b[0])))
}

//go:wasmexport proxy_on_context_create
func proxyOnContextCreate(id, parent uint32) {
	enter(id)
	if parent == 0 {
		state.plugins[id] = state.vm.NewPluginContext(id)
		return
	}
	if p := state.plugins[parent]; p != nil {
		if h := p.NewHttpContext(id); h != nil {
			putStream(id, h)
		}
	}
}

//go:wasmexport proxy_on_vm_start
func proxyOnVMStart(root, size uint32) uint32 {
	enter(root)
	return b2u(bool(state.vm.OnVMStart(int(size))))
}

//go:wasmexport proxy_on_configure
func proxyOnConfigure(root, size uint32) uint32 {
	enter(root)
	p := state.plugins[root]
	return b2u(p != nil && bool(p.OnPluginStart(int(size))))
}

//go:wasmexport proxy_on_tick
func proxyOnTick(root uint32) {
	enter(root)
	if p := state.plugins[root]; p != nil {
		p.OnTick()
	}
	finishGC()
}

// finishGC gives the scheduler a turn, so that a garbage collection a
// callback started can finish. A reactor's goroutines run only while a
// callback runs, and a callback that does not block never lets the GC's
// background worker run: a cycle that allocation started would stay in
// its mark phase, with write barriers on every pointer store, until enough
// later allocation assisted it to the end (for a filter that allocates
// nothing per request, never). A tick is the one callback that comes
// regularly and has time to spare.
func finishGC() { runtime.Gosched() }

//go:wasmexport proxy_on_queue_ready
func proxyOnQueueReady(root, queue uint32) {
	enter(root)
	if p := state.plugins[root]; p != nil {
		p.OnQueueReady(queue)
	}
}

//go:wasmexport proxy_on_http_call_response
func proxyOnHTTPCallResponse(root, id, numHeaders, bodySize, numTrailers uint32) {
	c, ok := state.callouts[id]
	if !ok {
		return
	}
	delete(state.callouts, id)
	enter(c.ctx)
	proxySetEffectiveContext(c.ctx)
	c.cb(int(numHeaders), int(bodySize), int(numTrailers))
}

func stream(id uint32) types.HttpContext {
	enter(id)
	return getStream(id)
}

//go:wasmexport proxy_on_request_headers
func proxyOnRequestHeaders(id, n, eos uint32) uint32 {
	if h := stream(id); h != nil {
		return uint32(h.OnHttpRequestHeaders(int(n), eos != 0))
	}
	return 0
}

//go:wasmexport proxy_on_request_body
func proxyOnRequestBody(id, size, eos uint32) uint32 {
	if h := stream(id); h != nil {
		return uint32(h.OnHttpRequestBody(int(size), eos != 0))
	}
	return 0
}

//go:wasmexport proxy_on_request_trailers
func proxyOnRequestTrailers(id, n uint32) uint32 {
	if h := stream(id); h != nil {
		return uint32(h.OnHttpRequestTrailers(int(n)))
	}
	return 0
}

//go:wasmexport proxy_on_response_headers
func proxyOnResponseHeaders(id, n, eos uint32) uint32 {
	if h := stream(id); h != nil {
		return uint32(h.OnHttpResponseHeaders(int(n), eos != 0))
	}
	return 0
}

//go:wasmexport proxy_on_response_body
func proxyOnResponseBody(id, size, eos uint32) uint32 {
	if h := stream(id); h != nil {
		return uint32(h.OnHttpResponseBody(int(size), eos != 0))
	}
	return 0
}

//go:wasmexport proxy_on_response_trailers
func proxyOnResponseTrailers(id, n uint32) uint32 {
	if h := stream(id); h != nil {
		return uint32(h.OnHttpResponseTrailers(int(n)))
	}
	return 0
}

// proxy_on_log ends an HTTP stream for the SDK's interfaces (the SDK calls
// OnHttpStreamDone from proxy_on_log as well).
//
//go:wasmexport proxy_on_log
func proxyOnLog(id uint32) {
	enter(id)
	endStream(id)
}

// endStream calls OnHttpStreamDone once per stream: from proxy_on_log, or
// from proxy_on_delete when Envoy destroyed the stream without access
// logging (cpp-host src/context.cc:242-248).
func endStream(id uint32) {
	if h := getStream(id); h != nil {
		deleteStream(id)
		h.OnHttpStreamDone()
	}
}

//go:wasmexport proxy_on_done
func proxyOnDone(id uint32) uint32 {
	enter(id)
	if p := state.plugins[id]; p != nil {
		return b2u(p.OnPluginDone())
	}
	return 1
}

//go:wasmexport proxy_on_delete
func proxyOnDelete(id uint32) {
	enter(id)
	endStream(id)
	if _, ok := state.plugins[id]; ok {
		delete(state.plugins, id)
	}
}

func b2u(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}
