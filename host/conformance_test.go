package host

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	wt "github.com/loctree/loctree/internal/testing/wasmtest"
)

// The conformance table: one row per behaviour of Envoy's proxy-wasm host
// (proxy-wasm-cpp-host, and Envoy where it adds its own), each with a
// hand-assembled module and the file:line it follows. cpp-host references
// are to github.com/proxy-wasm/proxy-wasm-cpp-host at 52a02917b301.

var (
	i32x = func(n int) []byte { return []byte(strings.Repeat(string(wt.I32), n)) }
	none []byte
)

// probeModule is the smallest proxy-wasm module around the functions of a
// test: two pages of memory, the ABI marker, malloc (always 4096) and
// proxy_on_context_create, after funcs. Imports are numbered from 0.
func probeModule(abi string, imports []wt.Import, funcs ...wt.Func) []byte {
	return proxyModule(abi, wt.Module{Imports: imports, Funcs: funcs})
}

// proxyModule completes m as probeModule does.
func proxyModule(abi string, m wt.Module) []byte {
	m.Pages = 2
	m.Funcs = append(m.Funcs, wt.Func{Export: "proxy_abi_version_" + abi}, wt.Func{Export: "proxy_on_context_create", Params: i32x(2)})
	if !slices.ContainsFunc(m.Funcs, func(f wt.Func) bool { return f.Export == "malloc" }) {
		m.Funcs = append(m.Funcs, wt.Func{Export: "malloc", Params: i32x(1), Results: i32x(1), Body: wt.I32Const(4096)})
	}
	return m.Bytes()
}

// probe is an exported function "probe" () -> i32 running body.
func probe(body ...[]byte) wt.Func {
	return wt.Func{Export: "probe", Results: i32x(1), Body: wt.Code(body...)}
}

// callProbe runs the module's "probe" export on a started VM.
func callProbe(t *testing.T, vm *VM) (uint32, error) {
	t.Helper()
	f := vm.mod.ExportedFunction("probe")
	if f == nil {
		t.Fatal("module has no probe export")
	}
	vm.mu.Lock()
	defer vm.mu.Unlock()
	r, err := vm.call(vm.runCtx, f)
	return uint32(r), err
}

// loadCase is a module that must load (err nil) or fail with err, whose
// message names want.
type loadCase struct {
	name, cite string
	module     []byte
	err        error
	want       string
}

func loadCases() []loadCase {
	log := wt.Import{Module: "env", Name: "proxy_log", Params: i32x(3), Results: i32x(1)}
	return []loadCase{
		{name: "wasi_unstable is linked", cite: "src/wasm.cc:131-134",
			module: probeModule("0_2_1", []wt.Import{{Module: "wasi_unstable", Name: "fd_write", Params: i32x(4), Results: i32x(1)}})},
		{name: "emscripten imports are linked", cite: "src/wasm.cc:107-114",
			module: probeModule("0_2_1", []wt.Import{{Module: "env", Name: "pthread_equal", Params: i32x(2), Results: i32x(1)},
				{Module: "env", Name: "emscripten_notify_memory_growth", Params: i32x(1)}})},
		{name: "missing import is named", cite: "src/v8/v8.cc:385-390", err: ErrMissingImport, want: "env.proxy_no_such_call",
			module: probeModule("0_2_1", []wt.Import{{Module: "env", Name: "proxy_no_such_call", Results: i32x(1)}})},
		{name: "import of another type is named", cite: "src/v8/v8.cc:393-403", err: ErrImportType, want: "env.proxy_log",
			module: probeModule("0_2_1", []wt.Import{{Module: "env", Name: "proxy_log", Params: i32x(2), Results: i32x(1)}})},
		{name: "get_log_level only for 0.2.1", cite: "src/wasm.cc:146-153", err: ErrMissingImport, want: "env.proxy_get_log_level",
			module: probeModule("0_2_0", []wt.Import{{Module: "env", Name: "proxy_get_log_level", Params: i32x(1), Results: i32x(1)}})},
		{name: "get_configuration only for 0.1.0", cite: "src/wasm.cc:141-145", err: ErrMissingImport, want: "env.proxy_get_configuration",
			module: probeModule("0_2_1", []wt.Import{{Module: "env", Name: "proxy_get_configuration", Params: i32x(2), Results: i32x(1)}})},
		{name: "ABI 0.1.0 loads with its calls", cite: "src/bytecode_util.cc:171-172, src/wasm.cc:141-145",
			module: probeModule("0_1_0", []wt.Import{{Module: "env", Name: "proxy_get_configuration", Params: i32x(2), Results: i32x(1)},
				{Module: "env", Name: "proxy_continue_request", Results: i32x(1)}, log})},
		{name: "continue_stream not for 0.1.0", cite: "src/wasm.cc:141-145", err: ErrMissingImport, want: "env.proxy_continue_stream",
			module: probeModule("0_1_0", []wt.Import{{Module: "env", Name: "proxy_continue_stream", Params: i32x(1), Results: i32x(1)}})},
		{name: "export signature checked in full", cite: "src/v8/v8.cc:681-697", err: ErrExportSignature, want: "proxy_on_done",
			module: probeModule("0_2_1", nil, wt.Func{Export: "proxy_on_done", Params: i32x(1)})},
		{name: "export parameter types checked", cite: "src/v8/v8.cc:681-697", err: ErrExportSignature, want: "proxy_on_tick",
			module: probeModule("0_2_1", nil, wt.Func{Export: "proxy_on_tick", Params: []byte{wt.I64}})},
		{name: "callbacks this host never calls are checked too", cite: "src/wasm.cc:194, include/proxy-wasm/wasm.h:274-282",
			err: ErrExportSignature, want: "proxy_on_downstream_data",
			module: probeModule("0_2_1", nil, wt.Func{Export: "proxy_on_downstream_data", Params: i32x(3)})},
		{name: "proxy_on_memory_allocate is not looked up beside malloc", cite: "src/wasm.cc:170-176",
			module: probeModule("0_2_1", nil, wt.Func{Export: "proxy_on_memory_allocate", Params: i32x(2)})},
	}
}

// TestConformanceLoad: what Envoy loads, the host loads; what Envoy
// rejects, the host rejects with an error naming the problem.
func TestConformanceLoad(t *testing.T) {
	for _, c := range loadCases() {
		t.Run(c.name, func(t *testing.T) {
			h, err := New(context.Background(), c.module, Options{Cache: cache})
			if err == nil {
				defer h.Close(context.Background())
				var vm *VM
				if vm, err = h.NewVM(context.Background()); err == nil {
					vm.Close()
				}
			}
			if c.err == nil && err != nil {
				t.Fatalf("%s: load failed: %v", c.cite, err)
			}
			if c.err != nil && (!errors.Is(err, c.err) || !strings.Contains(err.Error(), c.want)) {
				t.Fatalf("%s: err %v, want %v naming %s", c.cite, err, c.err, c.want)
			}
		})
	}
}

// wasiCase calls one WASI function with constant arguments from a probe
// and expects Envoy's errno; mem, if set, checks memory afterwards.
type wasiCase struct {
	name, cite string
	params     []byte
	args       [][]byte
	errno      uint32
	log        string // a log line the call must write
	mem        func(vm *VM) bool
}

func wasiCases() []wasiCase {
	c := wt.I32Const
	i64 := []byte{wt.I64}
	u32At := func(addr uint32, want uint32) func(*VM) bool {
		return func(vm *VM) bool { v, _ := vm.mem.ReadUint32Le(addr); return v == want }
	}
	return []wasiCase{
		{name: "fd_fdstat_set_flags", cite: "src/exports.cc:796-799", params: i32x(2), args: [][]byte{c(1), c(0)}, errno: errnoNoSys},
		{name: "fd_fdstat_get", cite: "src/exports.cc:776-779", params: i32x(2), args: [][]byte{c(0), c(256)}, errno: errnoBadF},
		{name: "fd_read", cite: "src/exports.cc:746-749", params: i32x(4), args: [][]byte{c(0), c(256), c(0), c(512)}, errno: errnoNoSys},
		{name: "random_get", cite: "src/exports.cc:1250-1253", params: i32x(2), args: [][]byte{c(256), c(65537)}, errno: errnoInval},
		{name: "clock_time_get", cite: "src/exports.cc:866-880", params: []byte{wt.I32, wt.I64, wt.I32},
			args: [][]byte{c(2), wt.I64Const(0), c(256)}, errno: errnoNotSup},
		{name: "poll_oneoff", cite: "src/exports.cc:1276-1284", params: i32x(4), args: [][]byte{c(1024), c(2048), c(1), c(256)},
			errno: errnoSuccess, mem: u32At(256, 0)},
		{name: "path_open", cite: "src/exports.cc:655-661",
			params: append(append(i32x(5), i64...), append(i64, i32x(2)...)...),
			args:   [][]byte{c(3), c(0), c(256), c(4), c(0), wt.I64Const(0), wt.I64Const(0), c(0), c(512)}, errno: errnoNoEnt},
		{name: "fd_seek", cite: "src/exports.cc:753-759", params: []byte{wt.I32, wt.I64, wt.I32, wt.I32},
			args: [][]byte{c(1), wt.I64Const(0), c(0), c(256)}, errno: errnoSuccess, log: "wasi_unstable fd_seek"},
		{name: "fd_write", cite: "src/exports.cc:679-743", params: i32x(4), args: [][]byte{c(1), c(300), c(1), c(256)},
			errno: errnoSuccess, log: "hello", mem: u32At(256, 6)},
		{name: "environ_sizes_get", cite: "src/exports.cc:830-847", params: i32x(2), args: [][]byte{c(256), c(260)},
			errno: errnoSuccess, mem: u32At(256, 0)},
	}
}

// TestConformanceWASI: WASI answers as Envoy's, under both module names.
func TestConformanceWASI(t *testing.T) {
	iov := []byte{0x40, 0x01, 0, 0, 6, 0, 0, 0} // at 300: {320, 6}
	data := append(append(make([]byte, 0, 64), iov...), make([]byte, 12)...)
	data = append(data, "hello\n"...) // at 320
	for _, c := range wasiCases() {
		for _, module := range []string{"wasi_snapshot_preview1", "wasi_unstable"} {
			t.Run(c.name+"/"+module, func(t *testing.T) {
				m := proxyModule("0_2_1", wt.Module{Imports: []wt.Import{{Module: module, Name: c.name, Params: c.params, Results: i32x(1)}},
					Data: data, DataAt: 300, Funcs: []wt.Func{probe(wt.Code(c.args...), wt.Call(0))}})
				h := newTestHost(t, m, Options{})
				vm, err := h.NewVM(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				defer vm.Close()
				got, err := callProbe(t, vm)
				if err != nil || got != c.errno {
					t.Fatalf("%s: errno %d (%v), want %d", c.cite, got, err, c.errno)
				}
				if c.mem != nil && !c.mem(vm) {
					t.Fatalf("%s: memory not as Envoy leaves it", c.cite)
				}
				if c.log != "" && !hasLog(h, c.log) {
					t.Fatalf("%s: no log line %q in %v", c.cite, c.log, h.Logs())
				}
			})
		}
	}
}

func hasLog(h *Host, msg string) bool {
	for _, l := range h.Logs() {
		if l.Message == msg {
			return true
		}
	}
	return false
}

// startCase is a module whose start or allocator runs a body; the VM must
// start (err nil) or fail with err, and log must be among the logs.
type startCase struct {
	name, cite string
	module     []byte
	err        error
	log        string
	probe      uint32 // with a probe export: its answer
}

func startCases() []startCase {
	logAt := func(at int32, n int32) []byte { // proxy_log(info, at, n), import 0
		return wt.Code(wt.I32Const(2), wt.I32Const(at), wt.I32Const(n), wt.Call(0), []byte{0x1a})
	}
	logImport := wt.Import{Module: "env", Name: "proxy_log", Params: i32x(3), Results: i32x(1)}
	clock := wt.Import{Module: "env", Name: "proxy_get_current_time_nanoseconds", Params: i32x(1), Results: i32x(1)}
	getProperty := wt.Import{Module: "env", Name: "proxy_get_property", Params: i32x(4), Results: i32x(1)}
	text := []byte("main!void!")
	iov := append([]byte{0x40, 0x01, 0, 0, 6, 0, 0, 0}, make([]byte, 12)...) // at 300: {320, 6}
	hello := append(iov, "hello\n"...)
	fdWrite := wt.Import{Module: "wasi_unstable", Name: "fd_write", Params: i32x(4), Results: i32x(1)}
	return []startCase{
		{name: "a wasi_unstable module writes to stdout in _initialize", cite: "src/wasm.cc:131-134, 388; src/exports.cc:679-743", log: "hello",
			module: proxyModule("0_2_1", wt.Module{Imports: []wt.Import{fdWrite}, Data: hello, DataAt: 300,
				Funcs: []wt.Func{{Export: "_initialize", Body: wt.Code(consts(1, 300, 1, 256), wt.Call(0), wt.Drop())}}})},
		{name: "proxy_log allowed in _initialize", cite: "src/wasm.cc:381-386", log: "main!",
			module: proxyModule("0_2_1", wt.Module{Imports: []wt.Import{logImport}, Data: text, DataAt: 300,
				Funcs: []wt.Func{{Export: "_initialize", Body: logAt(300, 5)}}})},
		{name: "other hostcalls trap in _initialize", cite: "src/wasm.cc:379-458, src/v8/v8.cc:568-569", err: ErrRestricted,
			module: proxyModule("0_2_1", wt.Module{Imports: []wt.Import{clock},
				Funcs: []wt.Func{{Export: "_initialize", Body: wt.Code(wt.I32Const(256), wt.Call(0), []byte{0x1a})}}})},
		{name: "__main_void after _initialize", cite: "src/wasm.cc:441-453", log: "void!",
			module: proxyModule("0_2_1", wt.Module{Imports: []wt.Import{logImport}, Data: text, DataAt: 300,
				Funcs: []wt.Func{{Export: "_initialize"}, {Export: "__main_void", Results: i32x(1), Body: wt.Code(logAt(305, 5), wt.I32Const(0))}}})},
		{name: "main before __main_void", cite: "src/wasm.cc:444-451", log: "main!",
			module: proxyModule("0_2_1", wt.Module{Imports: []wt.Import{logImport}, Data: text, DataAt: 300,
				Funcs: []wt.Func{{Export: "_initialize"}, {Export: "main", Params: i32x(2), Results: i32x(1), Body: wt.Code(logAt(300, 5), wt.I32Const(0))},
					{Export: "__main_void", Results: i32x(1), Body: wt.Code(wt.I32Const(0), wt.I32Load(), []byte{0x1a}, wt.I32Const(-1), wt.I32Load())}}})},
		{name: "malloc preferred over proxy_on_memory_allocate", cite: "src/wasm.cc:170-176", probe: 4096,
			module: proxyModule("0_2_1", wt.Module{Imports: []wt.Import{getProperty}, Data: []byte("plugin_name"), DataAt: 300,
				Funcs: []wt.Func{{Export: "proxy_on_memory_allocate", Params: i32x(1), Results: i32x(1), Body: wt.I32Const(8192)},
					probe(wt.I32Const(300), wt.I32Const(11), wt.I32Const(256), wt.I32Const(260), wt.Call(0), []byte{0x1a},
						wt.I32Const(256), wt.I32Load())}})},
		{name: "the allocator may not call other hostcalls", cite: "include/proxy-wasm/wasm.h:393-407", err: ErrRestricted,
			module: proxyModule("0_2_1", wt.Module{Imports: []wt.Import{getProperty, clock}, Data: []byte("plugin_name"), DataAt: 300,
				Funcs: []wt.Func{{Export: "malloc", Params: i32x(1), Results: i32x(1), Body: wt.Code(wt.I32Const(512), wt.Call(1), []byte{0x1a}, wt.I32Const(4096))},
					probe(wt.I32Const(300), wt.I32Const(11), wt.I32Const(256), wt.I32Const(260), wt.Call(0))}})},
	}
}

// TestConformanceStart: the start functions and the allocator run as
// cpp-host runs them, with its allow-lists of host functions.
func TestConformanceStart(t *testing.T) {
	for _, c := range startCases() {
		t.Run(c.name, func(t *testing.T) {
			h := newTestHost(t, c.module, Options{PluginName: "conformance"})
			vm, err := h.NewVM(context.Background())
			if err == nil {
				defer vm.Close()
				if vm.mod.ExportedFunction("probe") != nil {
					var got uint32
					if got, err = callProbe(t, vm); err == nil && got != c.probe {
						t.Fatalf("%s: probe answered %d, want %d", c.cite, got, c.probe)
					}
				}
			}
			if !errors.Is(err, c.err) {
				t.Fatalf("%s: err %v, want %v", c.cite, err, c.err)
			}
			if c.log != "" && !hasLog(h, c.log) {
				t.Fatalf("%s: no log line %q in %v", c.cite, c.log, h.Logs())
			}
		})
	}
}

// TestWASISetIsEnvoys: the WASI functions linked are exactly
// FOR_ALL_WASI_FUNCTIONS (cpp-host include/proxy-wasm/exports.h:202-214,
// transcribed), under both module names, each declared with named
// parameters and a reference.
func TestWASISetIsEnvoys(t *testing.T) {
	want := strings.Fields(`fd_write fd_read fd_seek fd_close fd_fdstat_get fd_fdstat_set_flags
		fd_fdstat_set_rights environ_get environ_sizes_get args_get args_sizes_get clock_time_get
		clock_res_get fd_advise fd_allocate fd_datasync fd_filestat_set_size fd_filestat_set_times
		fd_pread fd_pwrite fd_readdir fd_renumber fd_sync fd_tell path_create_directory
		path_filestat_set_times path_link path_readlink path_remove_directory path_rename
		path_symlink path_unlink_file sock_accept sock_recv sock_send sock_shutdown random_get
		sched_yield poll_oneoff proc_exit path_open fd_prestat_get fd_prestat_dir_name
		path_filestat_get fd_filestat_get`)
	slices.Sort(want)
	for _, module := range wasiModules {
		var got []string
		for _, f := range wasi(module) {
			got = append(got, f.name)
			checkDeclared(t, f)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("%s links %v\nwant %v", module, got, want)
		}
	}
}

// TestHostcallsDeclared: every "env" function of every ABI version has
// named parameters and a reference to what it follows.
func TestHostcallsDeclared(t *testing.T) {
	for _, abi := range []string{abi010, abi020, abi021} {
		for _, f := range hostcallsFor(abi) {
			checkDeclared(t, f)
		}
	}
}

func checkDeclared(t *testing.T, f hostFunc) {
	t.Helper()
	seen := map[string]bool{}
	for _, p := range f.params {
		if p.name == "" || seen[p.name] {
			t.Errorf("%s: parameter %q unnamed or repeated", f.qualified(), p.name)
		}
		seen[p.name] = true
	}
	if f.ref == "" || f.call == nil {
		t.Errorf("%s: no reference or no implementation", f.qualified())
	}
}

// TestConformanceProcExit: proc_exit logs and returns to the module
// (cpp-host src/exports.cc:1292-1295), under both WASI module names.
func TestConformanceProcExit(t *testing.T) {
	for _, module := range wasiModules {
		m := proxyModule("0_2_1", wt.Module{Imports: []wt.Import{{Module: module, Name: "proc_exit", Params: i32x(1)}},
			Funcs: []wt.Func{probe(consts(3), wt.Call(0), wt.I32Const(7))}})
		h := newTestHost(t, m, Options{})
		vm, err := h.NewVM(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if got, err := callProbe(t, vm); err != nil || got != 7 || !hasLog(h, "wasi_unstable proc_exit") {
			t.Fatalf("%s.proc_exit: probe %d (%v), logs %v; want 7 and the log line", module, got, err, h.Logs())
		}
		vm.Close()
	}
}

// TestRootWaitsForProxyDone: at shutdown a root context whose proxy_on_done
// answers false keeps its VM until it calls proxy_done (here from a tick);
// then proxy_on_delete runs (cpp-host src/wasm.cc:502-522,
// WasmBase::startShutdown and WasmBase::done). New streams are refused
// meanwhile.
func TestRootWaitsForProxyDone(t *testing.T) {
	logImport := wt.Import{Module: "env", Name: "proxy_log", Params: i32x(3), Results: i32x(1)}
	done := wt.Import{Module: "env", Name: "proxy_done", Results: i32x(1)}
	m := proxyModule("0_2_1", wt.Module{Imports: []wt.Import{logImport, done}, Data: []byte("deleted"), DataAt: 300,
		Funcs: []wt.Func{
			{Export: "proxy_on_done", Params: i32x(1), Results: i32x(1), Body: wt.I32Const(0)},
			{Export: "proxy_on_tick", Params: i32x(1), Body: wt.Code(wt.Call(1), wt.Drop())},
			{Export: "proxy_on_delete", Params: i32x(1), Body: wt.Code(consts(2, 300, 7), wt.Call(0), wt.Drop())},
		}})
	h := newTestHost(t, m, Options{ManualTicks: true})
	vm, err := h.NewVM(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	vm.Close()
	if hasLog(h, "deleted") || vm.Err() != nil {
		t.Fatalf("root deleted (%v) or VM gone (%v) before proxy_done", hasLog(h, "deleted"), vm.Err())
	}
	if _, err := vm.NewStream(nil); !errors.Is(err, ErrVMBroken) {
		t.Fatalf("new stream on a VM shutting down: %v, want ErrVMBroken", err)
	}
	if err := vm.Tick(); err != nil {
		t.Fatal(err)
	}
	if !hasLog(h, "deleted") || vm.Err() == nil {
		t.Fatalf("after proxy_done: deleted %v, VM error %v; want both", hasLog(h, "deleted"), vm.Err())
	}
}
