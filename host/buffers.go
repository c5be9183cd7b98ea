package host

// The buffer hostcalls (cpp-host src/exports.cc:443-509).

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
