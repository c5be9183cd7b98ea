package host

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/loctree/loctree/internal/pairs"
	wt "github.com/loctree/loctree/internal/testing/wasmtest"
)

// callCase runs a probe that makes hostcalls and checks its answer (the
// last call's status) and memory afterwards.
type callCase struct {
	name, cite string
	imports    []wt.Import
	body       [][]byte
	funcs      []wt.Func // extra exports (malloc, ...)
	data       []byte    // at 300
	opts       Options
	stream     int // 0: root context; 1: a stream before its headers; 2: after its request-headers callback
	want       Status
	mem        func(vm *VM) bool
}

func imp(name string, params []byte) wt.Import {
	return wt.Import{Module: "env", Name: name, Params: params, Results: i32x(1)}
}

func consts(vs ...int32) []byte {
	var b []byte
	for _, v := range vs {
		b = append(b, wt.I32Const(v)...)
	}
	return b
}

func u32At(addr, want uint32) func(*VM) bool {
	return func(vm *VM) bool { v, _ := vm.mem.ReadUint32Le(addr); return v == want }
}

func callCases() []callCase {
	getBuffer := imp("proxy_get_buffer_bytes", i32x(5))
	getValue := imp("proxy_get_header_map_value", i32x(5))
	define := imp("proxy_define_metric", i32x(4))
	pause := wt.Func{Export: "proxy_on_request_headers", Params: i32x(3), Results: i32x(1), Body: wt.I32Const(int32(ActionPause))}
	return []callCase{
		{name: "get_buffer_bytes past the end is Ok and empty", cite: "cpp-host src/exports.cc:457-471",
			imports: []wt.Import{getBuffer}, body: [][]byte{consts(bufferVMConfiguration, 10, 5, 256, 260), wt.Call(0)},
			opts: Options{VMConfig: []byte("abc")}, want: StatusOK, mem: u32At(260, 0)},
		{name: "get_buffer_bytes of an empty range is Ok", cite: "cpp-host src/exports.cc:463-471",
			imports: []wt.Import{getBuffer}, body: [][]byte{consts(bufferVMConfiguration, 1, 0, 256, 260), wt.Call(0)},
			opts: Options{VMConfig: []byte("abc")}, want: StatusOK, mem: u32At(260, 0)},
		{name: "plugin configuration only in on_configure", cite: "Envoy source/extensions/common/wasm/context.cc Context::getBuffer (temp_plugin_)",
			imports: []wt.Import{getBuffer}, body: [][]byte{consts(bufferPluginConfiguration, 0, 10, 256, 260), wt.Call(0)},
			opts: Options{PluginConfig: []byte("{}")}, want: StatusNotFound},
		{name: "set_shared_data with a CAS creates an absent key", cite: "cpp-host src/shared_data.cc:85-93",
			imports: []wt.Import{imp("proxy_set_shared_data", i32x(5))}, body: [][]byte{consts(300, 1, 301, 1, 99), wt.Call(0)},
			data: []byte("kv"), want: StatusOK},
		{name: "send_local_response drops malformed pairs", cite: "cpp-host src/exports.cc:150-159, src/pairs_util.cc:122-133",
			imports: []wt.Import{imp("proxy_send_local_response", i32x(8))}, body: [][]byte{consts(503, 0, 0, 0, 0, 300, 3, -1), wt.Call(0)},
			data: []byte("abc"), stream: 1, want: StatusOK},
		{name: "a header map that is not there is BadArgument", cite: "Envoy source/extensions/common/wasm/context.cc Context::getHeaderMapValue",
			imports: []wt.Import{getValue}, body: [][]byte{consts(mapResponseHeaders, 300, 1, 256, 260), wt.Call(0)},
			data: []byte("x"), stream: 1, want: StatusBadArgument},
		{name: "request headers cannot change once continued", cite: "Envoy source/extensions/common/wasm/context.cc Context::decodeHeaders, replaceHeaderMapValue",
			imports: []wt.Import{imp("proxy_replace_header_map_value", i32x(5))}, body: [][]byte{consts(mapRequestHeaders, 300, 1, 300, 1), wt.Call(0)},
			data: []byte("x"), stream: 2, want: StatusBadArgument},
		{name: "paused request headers can change", cite: "Envoy source/extensions/common/wasm/context.cc Context::decodeHeaders",
			imports: []wt.Import{imp("proxy_replace_header_map_value", i32x(5))}, body: [][]byte{consts(mapRequestHeaders, 300, 1, 300, 1), wt.Call(0)},
			funcs: []wt.Func{pause}, data: []byte("x"), stream: 2, want: StatusOK},
		{name: "request headers cannot change after continue_stream", cite: "Envoy source/extensions/common/wasm/context.cc Context::continueStream",
			imports: []wt.Import{imp("proxy_continue_stream", i32x(1)), imp("proxy_replace_header_map_value", i32x(5))},
			body:    [][]byte{consts(streamRequest), wt.Call(0), wt.Drop(), consts(mapRequestHeaders, 300, 1, 300, 1), wt.Call(1)},
			funcs:   []wt.Func{pause}, data: []byte("x"), stream: 2, want: StatusBadArgument},
		{name: "continue_stream of the upstream is Unimplemented", cite: "Envoy source/extensions/common/wasm/context.cc Context::continueStream",
			imports: []wt.Import{imp("proxy_continue_stream", i32x(1))}, body: [][]byte{consts(3), wt.Call(0)},
			stream: 1, want: StatusUnimplemented},
		{name: "get_header_map_pairs of a missing map is Ok and empty", cite: "Envoy source/extensions/common/wasm/context.cc Context::getHeaderMapPairs; cpp-host src/exports.cc:390-395",
			imports: []wt.Import{imp("proxy_get_header_map_pairs", i32x(3))}, body: [][]byte{consts(mapResponseHeaders, 256, 260), wt.Call(0)},
			stream: 1, want: StatusOK, mem: u32At(260, 0)},
		{name: "get_header_map_size of a missing map is BadArgument", cite: "Envoy source/extensions/common/wasm/context.cc Context::getHeaderMapSize",
			imports: []wt.Import{imp("proxy_get_header_map_size", i32x(2))}, body: [][]byte{consts(mapResponseHeaders, 256), wt.Call(0)},
			stream: 1, want: StatusBadArgument},
		{name: "get_log_level reports the configured level", cite: "Envoy source/extensions/common/wasm/context.cc Context::getLogLevel",
			imports: []wt.Import{imp("proxy_get_log_level", i32x(1))}, body: [][]byte{consts(256), wt.Call(0)},
			opts: Options{LogLevel: LogWarn}, want: StatusOK, mem: u32At(256, uint32(LogWarn))},
		{name: "metric ids carry their type", cite: "cpp-host include/proxy-wasm/wasm.h:158-171",
			imports: []wt.Import{define}, body: [][]byte{consts(int32(MetricGauge), 300, 1, 256), wt.Call(0)},
			data: []byte("g"), want: StatusOK, mem: u32At(256, 4+uint32(MetricGauge))},
		{name: "a counter cannot be incremented by 0", cite: "Envoy source/extensions/common/wasm/context.cc Context::incrementMetric",
			imports: []wt.Import{define, {Module: "env", Name: "proxy_increment_metric", Params: []byte{wt.I32, wt.I64}, Results: i32x(1)}},
			body:    [][]byte{consts(int32(MetricCounter), 300, 1, 256), wt.Call(0), wt.Drop(), consts(256), wt.I32Load(), wt.I64Const(0), wt.Call(1)},
			data:    []byte("c"), want: StatusBadArgument},
		{name: "set_effective_context takes any live context", cite: "cpp-host src/exports.cc:168-177",
			imports: []wt.Import{imp("proxy_set_effective_context", i32x(1))}, body: [][]byte{consts(1), wt.Call(0)},
			stream: 1, want: StatusOK},
		{name: "set_effective_context of no context is BadArgument", cite: "cpp-host src/exports.cc:171-174",
			imports: []wt.Import{imp("proxy_set_effective_context", i32x(1))}, body: [][]byte{consts(99), wt.Call(0)},
			want: StatusBadArgument},
		{name: "a failed allocation is InvalidMemoryAccess", cite: "cpp-host src/exports.cc:86-88 (copyToPointerSize)",
			imports: []wt.Import{imp("proxy_get_property", i32x(4))}, body: [][]byte{consts(300, 11, 256, 260), wt.Call(0)},
			funcs: []wt.Func{{Export: "malloc", Params: i32x(1), Results: i32x(1), Body: wt.I32Const(0)}},
			data:  []byte("plugin_name"), opts: Options{PluginName: "p"}, want: StatusInvalidMemoryAccess},
	}
}

// TestConformanceHostcalls: hostcalls answer as Envoy's do.
func TestConformanceHostcalls(t *testing.T) {
	for _, c := range callCases() {
		t.Run(c.name, func(t *testing.T) {
			m := proxyModule("0_2_1", wt.Module{Imports: c.imports, Data: c.data, DataAt: 300,
				Funcs: append(c.funcs, probe(c.body...))})
			vm, err := newTestHost(t, m, c.opts).NewVM(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer vm.Close()
			id := vm.rootID
			if c.stream > 0 {
				s, err := vm.NewStream(nil)
				if err != nil {
					t.Fatal(err)
				}
				if c.stream == 2 {
					s.RequestHeaders(Headers{{":path", "/"}}, true) // no callback: Continue
				}
				id = s.id
			}
			got, err := callProbeIn(t, vm, id)
			if err != nil || Status(got) != c.want {
				t.Fatalf("%s: status %d (%v), want %d", c.cite, got, err, c.want)
			}
			if c.mem != nil && !c.mem(vm) {
				t.Fatalf("%s: memory not as Envoy leaves it", c.cite)
			}
		})
	}
}

// callProbeIn runs the probe with context id effective.
func callProbeIn(t *testing.T, vm *VM, id uint32) (uint32, error) {
	t.Helper()
	vm.mu.Lock()
	vm.effective = id
	vm.mu.Unlock()
	return callProbe(t, vm)
}

// TestConformanceHTTPCallFailure: tokens are numbered as cpp-host numbers
// them (include/proxy-wasm/wasm.h:173-191: 4, 8, ...), and an upstream that
// refuses the connection or does not answer in time comes back as Envoy's
// async client delivers it: a 503 or 504 local reply with headers (Envoy
// source/common/router/router.cc, Filter::onUpstreamReset and
// onResponseTimeout), not an answer without headers.
func TestConformanceHTTPCallFailure(t *testing.T) {
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(2 * time.Second):
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	hdrs := pairs.Encode([][2]string{{":method", "GET"}, {":path", "/"}, {":authority", "up"}})
	call := imp("proxy_http_call", i32x(10))
	for _, c := range []struct {
		upstream       string
		timeoutMS      int32
		status, bodyOf string
	}{
		{"127.0.0.1:1", 1000, "503", "upstream connect error or disconnect/reset before headers. reset reason: connection failure"},
		{slow.Listener.Addr().String(), 50, "504", "upstream request timeout"},
	} {
		onResponse := wt.Func{Export: "proxy_on_http_call_response", Params: i32x(5),
			Body: wt.Code(consts(600), wt.LocalGet(2), wt.I32Store(), consts(604), wt.LocalGet(3), wt.I32Store())}
		m := proxyModule("0_2_1", wt.Module{Imports: []wt.Import{call}, Data: append([]byte("up"), hdrs...), DataAt: 300,
			Funcs: []wt.Func{onResponse, probe(consts(300, 2, 302, int32(len(hdrs)), 0, 0, 0, 0, c.timeoutMS, 256), wt.Call(0))}})
		vm, err := newTestHost(t, m, Options{Upstreams: map[string]string{"up": c.upstream}}).NewVM(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if got, err := callProbe(t, vm); err != nil || got != 0 || !u32At(256, 4)(vm) {
			token, _ := vm.mem.ReadUint32Le(256)
			t.Fatalf("http_call: status %d (%v), token %d; want 0 and token 4", got, err, token)
		}
		vm.WaitHTTPCalls()
		if !u32At(600, 3)(vm) || !u32At(604, uint32(len(c.bodyOf)))(vm) {
			h, _ := vm.mem.ReadUint32Le(600)
			b, _ := vm.mem.ReadUint32Le(604)
			t.Fatalf("%s answer: %d headers, %d body bytes; want 3 headers (:status %s, content-length, content-type), body %q",
				c.upstream, h, b, c.status, c.bodyOf)
		}
		vm.Close()
	}
}
