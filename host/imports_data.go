package host

import (
	"strings"
)

// buffer returns a pointer to the buffer the ABI names, or nil.
func (vm *VM) buffer(t uint64) (*[]byte, Status) {
	s := vm.streams[vm.effective]
	switch t {
	case bufferHTTPRequestBody:
		if s != nil {
			return &s.reqBody, StatusOK
		}
	case bufferHTTPResponseBody:
		if s != nil {
			return &s.respBody, StatusOK
		}
	case bufferHTTPCallResponseBody:
		if vm.callResp != nil {
			return &vm.callResp.body, StatusOK
		}
	case bufferVMConfiguration:
		b := vm.h.opts.VMConfig
		return &b, StatusOK
	case bufferPluginConfiguration:
		if vm.configuring { // only in proxy_on_configure (Envoy Context::getBuffer, temp_plugin_)
			b := vm.h.opts.PluginConfig
			return &b, StatusOK
		}
	case bufferDownstreamData, bufferUpstreamData, bufferGRPCReceive, bufferForeignArguments:
	default:
		return nil, StatusBadArgument
	}
	return nil, StatusNotFound
}

func hcGetBuffer(vm *VM, st []uint64) Status {
	buf, status := vm.buffer(st[0])
	if buf == nil {
		return status
	}
	// A start at or past the end, or an empty range, is Ok with no bytes
	// (cpp-host src/exports.cc:457-471).
	size := uint64(len(*buf))
	start := min(st[1], size)
	end := min(start+st[2], size)
	return vm.returnBytes((*buf)[start:end], st[3], st[4])
}

func hcSetBuffer(vm *VM, st []uint64) Status {
	buf, status := vm.buffer(st[0])
	if buf == nil || st[0] > bufferHTTPResponseBody {
		if buf != nil {
			return StatusBadArgument // configuration and call bodies are read-only
		}
		return status
	}
	v, ok := vm.read(st[3], st[4])
	if !ok {
		return StatusInvalidMemoryAccess
	}
	start := min(st[1], uint64(len(*buf)))
	end := min(start+st[2], uint64(len(*buf)))
	out := append(append(append([]byte(nil), (*buf)[:start]...), v...), (*buf)[end:]...)
	*buf = out
	return StatusOK
}

func hcBufferStatus(vm *VM, st []uint64) Status {
	buf, status := vm.buffer(st[0])
	if buf == nil {
		return status
	}
	if !vm.writeU32(st[1], uint32(len(*buf))) || !vm.writeU32(st[2], 0) {
		return StatusInvalidMemoryAccess
	}
	return StatusOK
}

func hcSetShared(vm *VM, st []uint64) Status {
	k, ok1 := vm.readString(st[0], st[1])
	v, ok2 := vm.read(st[2], st[3])
	if !ok1 || !ok2 {
		return StatusInvalidMemoryAccess
	}
	return vm.h.shared.Set(k, v, uint32(st[4]))
}

func hcGetShared(vm *VM, st []uint64) Status {
	k, ok := vm.readString(st[0], st[1])
	if !ok {
		return StatusInvalidMemoryAccess
	}
	v, cas, found := vm.h.shared.Get(k)
	if !found {
		return StatusNotFound
	}
	if s := vm.returnBytes(v, st[2], st[3]); s != StatusOK {
		return s
	}
	if !vm.writeU32(st[4], cas) {
		return StatusInvalidMemoryAccess
	}
	return StatusOK
}

func hcRegisterQueue(vm *VM, st []uint64) Status {
	name, ok := vm.readString(st[0], st[1])
	if !ok {
		return StatusInvalidMemoryAccess
	}
	id := vm.h.queues.register(name, vm, vm.rootID)
	if !vm.writeU32(st[2], id) {
		return StatusInvalidMemoryAccess
	}
	return StatusOK
}

func hcResolveQueue(vm *VM, st []uint64) Status {
	name, ok := vm.readString(st[2], st[3])
	if !ok {
		return StatusInvalidMemoryAccess
	}
	id, found := vm.h.queues.resolve(name)
	if !found {
		return StatusNotFound
	}
	if !vm.writeU32(st[4], id) {
		return StatusInvalidMemoryAccess
	}
	return StatusOK
}

func hcEnqueue(vm *VM, st []uint64) Status {
	v, ok := vm.read(st[1], st[2])
	if !ok {
		return StatusInvalidMemoryAccess
	}
	owner, ctxID, status := vm.h.queues.enqueue(uint32(st[0]), v)
	if status == StatusOK && owner != nil {
		go owner.queueReady(ctxID, uint32(st[0]))
	}
	return status
}

// queueReady delivers proxy_on_queue_ready.
func (vm *VM) queueReady(ctxID, queueID uint32) {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	if vm.broken != nil {
		return
	}
	ctx := vm.runCtx
	vm.effective = ctxID
	vm.call(ctx, vm.fn.queueReady, uint64(ctxID), uint64(queueID))
	vm.afterCall()
}

func hcDequeue(vm *VM, st []uint64) Status {
	v, status := vm.h.queues.dequeue(uint32(st[0]))
	if status != StatusOK {
		return status
	}
	return vm.returnBytes(v, st[1], st[2])
}

func hcDefineMetric(vm *VM, st []uint64) Status {
	name, ok := vm.readString(st[1], st[2])
	if !ok {
		return StatusInvalidMemoryAccess
	}
	id, status := vm.h.metrics.define(MetricType(st[0]), name)
	if status == StatusOK && !vm.writeU32(st[3], id) {
		return StatusInvalidMemoryAccess
	}
	return status
}

func hcIncrementMetric(vm *VM, st []uint64) Status {
	return vm.h.metrics.increment(uint32(st[0]), int64(st[1]))
}

func hcRecordMetric(vm *VM, st []uint64) Status {
	return vm.h.metrics.record(uint32(st[0]), st[1])
}

func hcGetMetric(vm *VM, st []uint64) Status {
	v, status := vm.h.metrics.value(uint32(st[0]))
	if status == StatusOK && !vm.writeU64(st[1], v) {
		return StatusInvalidMemoryAccess
	}
	return status
}

func hcGetProperty(vm *VM, st []uint64) Status {
	p, ok := vm.view(st[0], st[1]) // used before the module runs again
	if !ok {
		return StatusInvalidMemoryAccess
	}
	v, found := vm.property(strings.TrimSuffix(p, "\x00"))
	if !found {
		return StatusNotFound
	}
	return vm.returnBytes(v, st[2], st[3])
}

// property looks a wire path up in the stream's properties, the host's, and
// the built-in ones (plugin_*, request.*).
func (vm *VM) property(path string) ([]byte, bool) {
	s := vm.streams[vm.effective]
	if s != nil {
		if v, ok := s.props.Get(path); ok {
			return v, true
		}
	}
	if v, ok := vm.h.props.Get(path); ok {
		return v, true
	}
	switch path {
	case "plugin_name":
		return []byte(vm.h.opts.PluginName), true
	case "plugin_root_id":
		return []byte(vm.h.opts.RootID), true
	case "plugin_vm_id":
		return []byte(vm.h.opts.VMID), true
	}
	if s != nil {
		return s.requestProperty(path)
	}
	return nil, false
}

// requestProperty answers Envoy's request.* attributes from the headers.
func (s *Stream) requestProperty(path string) ([]byte, bool) {
	var header string
	switch path {
	case "request\x00path":
		header = ":path"
	case "request\x00host":
		header = ":authority"
	case "request\x00method":
		header = ":method"
	case "request\x00scheme":
		header = ":scheme"
	case "request\x00id":
		header = "x-request-id"
	case "request\x00referer":
		header = "referer"
	case "request\x00useragent":
		header = "user-agent"
	case "request\x00url_path":
		p, _ := s.reqHeaders.Get(":path")
		p, _, _ = strings.Cut(p, "?")
		return []byte(p), true
	default:
		return nil, false
	}
	v, ok := s.reqHeaders.Get(header)
	return []byte(v), ok
}

func hcSetProperty(vm *VM, st []uint64) Status {
	p, ok1 := vm.readString(st[0], st[1])
	v, ok2 := vm.read(st[2], st[3])
	if !ok1 || !ok2 {
		return StatusInvalidMemoryAccess
	}
	s := vm.streams[vm.effective]
	if s == nil {
		return StatusNotFound
	}
	if s.props == nil {
		s.props = NewProperties()
	}
	s.props.SetBytes(strings.Split(strings.TrimSuffix(p, "\x00"), "\x00"), v)
	return StatusOK
}
