package host

import (
	"time"

	"github.com/tetratelabs/wazero/api"
)

// The proxy-wasm hostcalls ("env"), as cpp-host registers them
// (src/wasm.cc:106-157, WasmBase::registerCallbacks): every ABI version gets
// FOR_ALL_HOST_FUNCTIONS (include/proxy-wasm/exports.h:184), and each
// version its own few. Parameter names follow exports.h:67-127 and the
// proxy-wasm spec (github.com/proxy-wasm/spec, abi-versions/v0.2.1).

// hostcallsFor returns the "env" functions offered to a module of the given
// ABI version ("0_1_0", "0_2_0" or "0_2_1").
func hostcallsFor(abi string) []hostFunc {
	fs := append(commonHostcalls(), emscripten()...)
	switch abi {
	case abi010:
		return append(fs, abi010Hostcalls()...)
	case abi020:
		return append(fs, abi020Hostcalls()...)
	}
	return append(append(fs, abi020Hostcalls()...), abi021Hostcalls()...)
}

// emscripten: registered for every module (cpp-host src/wasm.cc:107-114).
func emscripten() []hostFunc {
	return []hostFunc{
		{module: "env", name: "pthread_equal", params: []param{i32("left"), i32("right")},
			results: []api.ValueType{api.ValueTypeI32}, call: hcPthreadEqual, ref: "exports.cc:1297"},
		{module: "env", name: "emscripten_notify_memory_growth", params: []param{i32("memory_index")},
			call: func(*VM, []uint64) {}, ref: "exports.cc:1299"},
	}
}

func hcPthreadEqual(_ *VM, st []uint64) { st[0] = b2u(uint32(st[0]) == uint32(st[1])) }

// abi010Hostcalls are registered for ABI 0.1.0 only (cpp-host src/wasm.cc:141-145).
func abi010Hostcalls() []hostFunc {
	return []hostFunc{
		proxy("proxy_get_configuration", hcGetConfiguration, "exports.h:67", i32("return_buffer_data"), i32("return_buffer_size")),
		proxy("proxy_continue_request", func(vm *VM, _ []uint64) Status { return vm.resume(streamRequest) }, "exports.h:73"),
		proxy("proxy_continue_response", func(vm *VM, _ []uint64) Status { return vm.resume(streamResponse) }, "exports.h:74"),
		proxy("proxy_clear_route_cache", func(*VM, []uint64) Status { return StatusOK }, "exports.h:81"),
	}
}

// abi020Hostcalls are registered for ABI 0.2.0 and 0.2.1 (cpp-host src/wasm.cc:146-151).
func abi020Hostcalls() []hostFunc {
	return []hostFunc{
		proxy("proxy_continue_stream", hcContinue, "exports.h:75", i32("stream_type")),
		proxy("proxy_close_stream", hcCloseStream, "exports.h:76", i32("stream_type")),
	}
}

// abi021Hostcalls are registered for ABI 0.2.1 only (cpp-host src/wasm.cc:152).
func abi021Hostcalls() []hostFunc {
	return []hostFunc{
		proxy("proxy_get_log_level", hcGetLogLevel, "exports.h:70", i32("return_log_level")),
	}
}

// commonHostcalls is FOR_ALL_HOST_FUNCTIONS (cpp-host include/proxy-wasm/exports.h:184).
func commonHostcalls() []hostFunc {
	return []hostFunc{
		proxy("proxy_log", hcLog, "exports.h:69", i32("log_level"), i32("message_data"), i32("message_size")),
		proxy("proxy_get_status", hcGetStatus, "exports.h:68", i32("return_status_code"), i32("return_message_data"), i32("return_message_size")),
		proxy("proxy_set_property", hcSetProperty, "exports.h:72", i32("property_path_data"), i32("property_path_size"), i32("property_value_data"), i32("property_value_size")),
		proxy("proxy_get_property", hcGetProperty, "exports.h:71", i32("property_path_data"), i32("property_path_size"), i32("return_property_value_data"), i32("return_property_value_size")),
		proxy("proxy_send_local_response", hcLocalResponse, "exports.h:77", i32("response_code"), i32("response_code_details_data"), i32("response_code_details_size"),
			i32("response_body_data"), i32("response_body_size"), i32("additional_headers_map_data"), i32("additional_headers_size"), i32("grpc_status")),
		proxy("proxy_get_shared_data", hcGetShared, "exports.h:82", i32("key_data"), i32("key_size"), i32("return_value_data"), i32("return_value_size"), i32("return_cas")),
		proxy("proxy_set_shared_data", hcSetShared, "exports.h:84", i32("key_data"), i32("key_size"), i32("value_data"), i32("value_size"), i32("cas")),
		proxy("proxy_register_shared_queue", hcRegisterQueue, "exports.h:85", i32("queue_name_data"), i32("queue_name_size"), i32("return_queue_id")),
		proxy("proxy_resolve_shared_queue", hcResolveQueue, "exports.h:86", i32("vm_id_data"), i32("vm_id_size"), i32("queue_name_data"), i32("queue_name_size"), i32("return_queue_id")),
		proxy("proxy_dequeue_shared_queue", hcDequeue, "exports.h:88", i32("queue_id"), i32("return_payload_data"), i32("return_payload_size")),
		proxy("proxy_enqueue_shared_queue", hcEnqueue, "exports.h:89", i32("queue_id"), i32("payload_data"), i32("payload_size")),
		proxy("proxy_get_header_map_value", hcGetValue, "exports.h:94", i32("map_type"), i32("key_data"), i32("key_size"), i32("return_value_data"), i32("return_value_size")),
		proxy("proxy_add_header_map_value", hcAddValue, "exports.h:93", i32("map_type"), i32("key_data"), i32("key_size"), i32("value_data"), i32("value_size")),
		proxy("proxy_replace_header_map_value", hcReplaceValue, "exports.h:96", i32("map_type"), i32("key_data"), i32("key_size"), i32("value_data"), i32("value_size")),
		proxy("proxy_remove_header_map_value", hcRemoveValue, "exports.h:98", i32("map_type"), i32("key_data"), i32("key_size")),
		proxy("proxy_get_header_map_pairs", hcGetPairs, "exports.h:99", i32("map_type"), i32("return_map_data"), i32("return_map_size")),
		proxy("proxy_set_header_map_pairs", hcSetPairs, "exports.h:100", i32("map_type"), i32("map_data"), i32("map_size")),
		proxy("proxy_get_header_map_size", hcMapSize, "exports.h:101", i32("map_type"), i32("return_map_size")),
		proxy("proxy_get_buffer_status", hcBufferStatus, "exports.h:91", i32("buffer_type"), i32("return_buffer_size"), i32("return_buffer_flags")),
		proxy("proxy_get_buffer_bytes", hcGetBuffer, "exports.h:90", i32("buffer_type"), i32("offset"), i32("max_size"), i32("return_buffer_data"), i32("return_buffer_size")),
		proxy("proxy_set_buffer_bytes", hcSetBuffer, "exports.h:92", i32("buffer_type"), i32("offset"), i32("size"), i32("buffer_data"), i32("buffer_size")),
		proxy("proxy_http_call", hcHTTPCall, "exports.h:104", i32("upstream_data"), i32("upstream_size"), i32("headers_map_data"), i32("headers_map_size"),
			i32("body_data"), i32("body_size"), i32("trailers_map_data"), i32("trailers_map_size"), i32("timeout_milliseconds"), i32("return_call_id")),
		unimplemented("proxy_grpc_call", "exports.h:111", i32("upstream_data"), i32("upstream_size"), i32("service_name_data"), i32("service_name_size"),
			i32("method_name_data"), i32("method_name_size"), i32("initial_metadata_map_data"), i32("initial_metadata_map_size"),
			i32("grpc_message_data"), i32("grpc_message_size"), i32("timeout_milliseconds"), i32("return_call_id")),
		unimplemented("proxy_grpc_stream", "exports.h:115", i32("upstream_data"), i32("upstream_size"), i32("service_name_data"), i32("service_name_size"),
			i32("method_name_data"), i32("method_name_size"), i32("initial_metadata_map_data"), i32("initial_metadata_map_size"), i32("return_stream_id")),
		unimplemented("proxy_grpc_close", "exports.h:119", i32("call_or_stream_id")),
		unimplemented("proxy_grpc_cancel", "exports.h:118", i32("call_or_stream_id")),
		unimplemented("proxy_grpc_send", "exports.h:120", i32("stream_id"), i32("grpc_message_data"), i32("grpc_message_size"), i32("end_stream")),
		proxy("proxy_set_tick_period_milliseconds", hcSetTick, "exports.h:122", i32("tick_period")),
		proxy("proxy_get_current_time_nanoseconds", hcTime, "exports.h:123", i32("return_time")),
		proxy("proxy_define_metric", hcDefineMetric, "exports.h:107", i32("metric_type"), i32("metric_name_data"), i32("metric_name_size"), i32("return_metric_id")),
		proxy("proxy_increment_metric", hcIncrementMetric, "exports.h:108", i32("metric_id"), i64("offset")),
		proxy("proxy_record_metric", hcRecordMetric, "exports.h:109", i32("metric_id"), i64("value")),
		proxy("proxy_get_metric", hcGetMetric, "exports.h:110", i32("metric_id"), i32("return_value")),
		proxy("proxy_set_effective_context", hcSetEffective, "exports.h:125", i32("context_id")),
		proxy("proxy_done", hcDone, "exports.h:126"),
		unimplemented("proxy_call_foreign_function", "exports.h:127", i32("function_name_data"), i32("function_name_size"),
			i32("parameters_data"), i32("parameters_size"), i32("return_results_data"), i32("return_results_size")),
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
	if vm.configuring && LogLevel(st[0]) >= LogWarn {
		vm.configureLog = msg
	}
	return StatusOK
}

// hcGetLogLevel reports the configured level (Options.LogLevel), as Envoy
// reports its logger's (source/extensions/common/wasm/context.cc,
// Context::getLogLevel).
func hcGetLogLevel(vm *VM, st []uint64) Status {
	if !vm.writeU32(st[0], uint32(vm.h.opts.LogLevel)) {
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

// hcDone: proxy_done ends a root context whose proxy_on_done answered
// false at shutdown; proxy_on_delete follows when the current callback
// returns (cpp-host src/wasm.cc:514-522, WasmBase::done). Otherwise, and
// for a stream, which never waits, NotFound.
func hcDone(vm *VM, _ []uint64) Status {
	if !vm.draining || vm.rootDone {
		return StatusNotFound
	}
	vm.rootDone = true
	return StatusOK
}

func hcGetConfiguration(vm *VM, st []uint64) Status {
	return vm.returnBytes(vm.h.opts.PluginConfig, st[0], st[1])
}

func hcContinue(vm *VM, st []uint64) Status { return vm.resume(uint32(st[0])) }

// resume continues a paused stream of the effective context as Envoy's
// Context::continueStream does (source/extensions/common/wasm/context.cc):
// continuing the request or the response drops the request's header and
// trailer maps; the downstream is Ok, the upstream Unimplemented.
func (vm *VM) resume(streamType uint32) Status {
	switch streamType {
	case streamRequest, streamResponse:
	case streamDownstream:
		return StatusOK
	case streamUpstream:
		return StatusUnimplemented
	default:
		return StatusBadArgument
	}
	if s := vm.streams[vm.effective]; s != nil {
		s.live[mapRequestHeaders], s.live[mapRequestTrailers] = false, false
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
	headers := toPairs(hb) // malformed pairs are dropped (cpp-host src/exports.cc:155)
	if s == nil {
		return StatusNotFound
	}
	s.pending = &LocalResponse{Status: int(uint32(st[0])), Details: details,
		Body: append([]byte(nil), body...), Headers: headers.lowered(), GRPC: int32(uint32(st[7]))}
	vm.deferred = append(vm.deferred, s)
	return StatusOK
}
