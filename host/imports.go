package host

import (
	"time"

	"github.com/tetratelabs/wazero/api"
)

type hostcall struct {
	name   string
	params []api.ValueType
	fn     func(vm *VM, st []uint64) Status
}

func i32s(n int) []api.ValueType {
	p := make([]api.ValueType, n)
	for i := range p {
		p[i] = api.ValueTypeI32
	}
	return p
}

func unimplemented(name string, n int) hostcall {
	return hostcall{name, i32s(n), func(*VM, []uint64) Status { return StatusUnimplemented }}
}

// hostcalls lists every function of the proxy-wasm ABI 0.2.1 "env" module
// that Envoy exports, plus the 0.1.0-era names Envoy still links.
func hostcalls() []hostcall {
	i64 := []api.ValueType{api.ValueTypeI32, api.ValueTypeI64}
	return []hostcall{
		{"proxy_log", i32s(3), hcLog},
		{"proxy_get_log_level", i32s(1), hcGetLogLevel},
		{"proxy_get_current_time_nanoseconds", i32s(1), hcTime},
		{"proxy_set_tick_period_milliseconds", i32s(1), hcSetTick},
		{"proxy_get_buffer_bytes", i32s(5), hcGetBuffer},
		{"proxy_set_buffer_bytes", i32s(5), hcSetBuffer},
		{"proxy_get_buffer_status", i32s(3), hcBufferStatus},
		{"proxy_get_header_map_size", i32s(2), hcMapSize},
		{"proxy_get_header_map_pairs", i32s(3), hcGetPairs},
		{"proxy_set_header_map_pairs", i32s(3), hcSetPairs},
		{"proxy_get_header_map_value", i32s(5), hcGetValue},
		{"proxy_add_header_map_value", i32s(5), hcAddValue},
		{"proxy_replace_header_map_value", i32s(5), hcReplaceValue},
		{"proxy_remove_header_map_value", i32s(3), hcRemoveValue},
		{"proxy_continue_stream", i32s(1), hcContinue},
		{"proxy_close_stream", i32s(1), hcCloseStream},
		{"proxy_get_status", i32s(3), hcGetStatus},
		{"proxy_send_local_response", i32s(8), hcLocalResponse},
		{"proxy_http_call", i32s(10), hcHTTPCall},
		{"proxy_set_shared_data", i32s(5), hcSetShared},
		{"proxy_get_shared_data", i32s(5), hcGetShared},
		{"proxy_register_shared_queue", i32s(3), hcRegisterQueue},
		{"proxy_resolve_shared_queue", i32s(5), hcResolveQueue},
		{"proxy_enqueue_shared_queue", i32s(3), hcEnqueue},
		{"proxy_dequeue_shared_queue", i32s(3), hcDequeue},
		{"proxy_define_metric", i32s(4), hcDefineMetric},
		{"proxy_increment_metric", i64, hcIncrementMetric},
		{"proxy_record_metric", i64, hcRecordMetric},
		{"proxy_get_metric", i32s(2), hcGetMetric},
		{"proxy_get_property", i32s(4), hcGetProperty},
		{"proxy_set_property", i32s(4), hcSetProperty},
		{"proxy_set_effective_context", i32s(1), hcSetEffective},
		{"proxy_done", i32s(0), hcDone},
		{"proxy_get_configuration", i32s(2), hcGetConfiguration},
		{"proxy_continue_request", i32s(0), func(vm *VM, _ []uint64) Status { return vm.resume(streamRequest) }},
		{"proxy_continue_response", i32s(0), func(vm *VM, _ []uint64) Status { return vm.resume(streamResponse) }},
		{"proxy_clear_route_cache", i32s(0), func(*VM, []uint64) Status { return StatusOK }},
		unimplemented("proxy_grpc_call", 12),
		unimplemented("proxy_grpc_stream", 9),
		unimplemented("proxy_grpc_send", 4),
		unimplemented("proxy_grpc_cancel", 1),
		unimplemented("proxy_grpc_close", 1),
		unimplemented("proxy_call_foreign_function", 6),
	}
}

func hcLog(vm *VM, st []uint64) Status {
	if LogLevel(st[0]) > LogCritical {
		return StatusBadArgument
	}
	msg, ok := vm.readString(st[1], st[2])
	if !ok {
		return StatusInvalidMemoryAccess
	}
	vm.h.emit(LogEntry{VM: vm.id, Level: LogLevel(st[0]), Message: msg})
	return StatusOK
}

func hcGetLogLevel(vm *VM, st []uint64) Status {
	if !vm.writeU32(st[0], uint32(LogTrace)) {
		return StatusInvalidMemoryAccess
	}
	return StatusOK
}

func hcTime(vm *VM, st []uint64) Status {
	if !vm.writeU64(st[0], uint64(time.Now().UnixNano())) {
		return StatusInvalidMemoryAccess
	}
	return StatusOK
}

func hcSetTick(vm *VM, st []uint64) Status {
	vm.setTick(time.Duration(uint32(st[0])) * time.Millisecond)
	return StatusOK
}

func hcSetEffective(vm *VM, st []uint64) Status {
	id := uint32(st[0])
	if _, ok := vm.streams[id]; !ok && id != vm.rootID {
		return StatusBadArgument
	}
	vm.effective = id
	return StatusOK
}

// hcDone finishes a stream whose proxy_on_done returned false:
// proxy_on_delete follows when the current callback returns.
func hcDone(vm *VM, _ []uint64) Status {
	s := vm.streams[vm.effective]
	if s == nil || !s.awaitDone {
		return StatusNotFound
	}
	s.awaitDone = false
	vm.deletes = append(vm.deletes, s)
	return StatusOK
}

func hcGetConfiguration(vm *VM, st []uint64) Status {
	return vm.returnBytes(vm.h.opts.PluginConfig, st[0], st[1])
}

func hcContinue(vm *VM, st []uint64) Status { return vm.resume(uint32(st[0])) }

// resume continues a paused stream of the effective context.
func (vm *VM) resume(streamType uint32) Status {
	if streamType > 3 {
		return StatusBadArgument
	}
	if s := vm.streams[vm.effective]; s != nil {
		s.signal()
	}
	return StatusOK
}

func hcCloseStream(vm *VM, st []uint64) Status {
	if st[0] > 3 {
		return StatusBadArgument
	}
	if s := vm.streams[vm.effective]; s != nil && s.local == nil && s.pending == nil {
		s.pending = &LocalResponse{Status: 503, Details: "closed_by_plugin", GRPC: -1}
		vm.deferred = append(vm.deferred, s)
	}
	return StatusOK
}

func hcLocalResponse(vm *VM, st []uint64) Status {
	s := vm.streams[vm.effective]
	details, ok1 := vm.readString(st[1], st[2])
	body, ok2 := vm.read(st[3], st[4])
	hb, ok3 := vm.read(st[5], st[6])
	if !ok1 || !ok2 || !ok3 {
		return StatusInvalidMemoryAccess
	}
	headers, err := DecodePairs(hb)
	if err != nil {
		return StatusBadArgument
	}
	if s == nil {
		return StatusNotFound
	}
	s.pending = &LocalResponse{Status: int(uint32(st[0])), Details: details,
		Body: append([]byte(nil), body...), Headers: headers.lowered(), GRPC: int32(uint32(st[7]))}
	vm.deferred = append(vm.deferred, s)
	return StatusOK
}
