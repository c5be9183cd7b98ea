package host

import (
	"context"
	"errors"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/loctree/loctree/internal/testing/wasmtest"
	"github.com/tetratelabs/wazero"
)

var cache = wazero.NewCompilationCache()

//go:generate sh testdata/assemblyscript/build.sh

// otherSDK builds testdata/othersdk, a module with another SDK's export set.
func otherSDK(t testing.TB) []byte {
	t.Helper()
	return wasmtest.Bytes(t, "./testdata/othersdk")
}

// teapot is a hand-assembled module (no SDK, no WASI, no _initialize): it
// exports memory, malloc and the 0.2.1 marker, and answers every request
// with a local 418 "teapot".
func teapot() []byte {
	vec := func(items ...[]byte) []byte {
		out := []byte{byte(len(items))}
		for _, it := range items {
			out = append(out, it...)
		}
		return out
	}
	section := func(id byte, content []byte) []byte { return append([]byte{id, byte(len(content))}, content...) }
	str := func(s string) []byte { return append([]byte{byte(len(s))}, s...) }
	fn := func(params, results int) []byte {
		t := []byte{0x60, byte(params)}
		for range params {
			t = append(t, 0x7f)
		}
		t = append(t, byte(results))
		for range results {
			t = append(t, 0x7f)
		}
		return t
	}
	body := func(code ...byte) []byte { return append([]byte{byte(len(code) + 1), 0x00}, code...) }
	m := []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}
	m = append(m, section(1, vec(fn(8, 1), fn(1, 1), fn(0, 0), fn(2, 0), fn(3, 1)))...)
	m = append(m, section(2, vec(append(append(str("env"), str("proxy_send_local_response")...), 0x00, 0x00)))...)
	m = append(m, section(3, vec([]byte{1}, []byte{2}, []byte{3}, []byte{4}))...)
	m = append(m, section(5, vec([]byte{0x00, 0x01}))...)
	m = append(m, section(7, vec(
		append(str("memory"), 0x02, 0x00), append(str("malloc"), 0x00, 0x01),
		append(str("proxy_abi_version_0_2_1"), 0x00, 0x02), append(str("proxy_on_context_create"), 0x00, 0x03),
		append(str("proxy_on_request_headers"), 0x00, 0x04)))...)
	m = append(m, section(10, vec(
		body(0x41, 0x80, 0x08, 0x0b), body(0x0b), body(0x0b),
		body(0x41, 0xa2, 0x03, 0x41, 0x00, 0x41, 0x00, 0x41, 0x10, 0x41, 0x06, 0x41, 0x00, 0x41, 0x00, 0x41, 0x7f,
			0x10, 0x00, 0x1a, 0x41, 0x01, 0x0b)))...)
	m = append(m, section(11, vec(append([]byte{0x00, 0x41, 0x10, 0x0b}, str("teapot")...)))...)
	return m
}

func newTestHost(t *testing.T, module []byte, opts Options) *Host {
	t.Helper()
	opts.Cache = cache
	h, err := New(context.Background(), module, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	return h
}

func TestHandAssembledModule(t *testing.T) {
	h := newTestHost(t, teapot(), Options{})
	vm, err := h.NewVM(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	res, err := vm.Do(context.Background(), &Request{Headers: Headers{{":path", "/"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Local == nil || res.Local.Status != 418 || string(res.Local.Body) != "teapot" || res.Local.GRPC != -1 {
		t.Fatalf("local response %+v", res.Local)
	}
}

func TestOtherSDKModule(t *testing.T) {
	h := newTestHost(t, otherSDK(t), Options{RootID: "root-7", PluginConfig: []byte("{}")})
	if h.ABIVersion() != "0.2.0" {
		t.Fatalf("ABI %s, want 0.2.0", h.ABIVersion())
	}
	vm, err := h.NewVM(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	res, err := vm.Do(context.Background(), &Request{Headers: Headers{{":path", "/"}, {"X-In", "1"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := res.Request.Headers
	// x-cas-status: a set with a CAS on an absent key creates it (cpp-host
	// src/shared_data.cc:85-93).
	for k, want := range map[string]string{"x-in": "1", "x-grpc-status": "12", "x-root-id": "root-7", "x-cas-status": "0"} {
		if v, _ := got.Get(k); v != want {
			t.Errorf("header %s = %q, want %q (headers %v)", k, v, want, got)
		}
	}
	vm.Close()
	want := "create 1 0,vm_start 0,configure 2,create 2 1,request_headers 2 1,log 2,done 2,delete 2,done 1,delete 1"
	if got := vmLogs(h, vm.ID()); got != want {
		t.Fatalf("callback order\n got %s\nwant %s", got, want)
	}
}

// TestRootID runs a module built with another SDK (AssemblyScript,
// testdata/assemblyscript) that registers its root context under "peer":
// with that root id it starts and reads it back as plugin_root_id, with
// the vm id as plugin_vm_id (Envoy source/extensions/common/wasm/context.cc,
// PLUGIN_ROOT_ID and PLUGIN_VM_ID); with Envoy's default root id "" it
// fails to start, naming the root id, as it would in Envoy.
func TestRootID(t *testing.T) {
	mod, err := os.ReadFile("testdata/assemblyscript/peer.wasm")
	if err != nil {
		t.Fatal(err)
	}
	// A plugin configuration, as Istio always passes: with an empty one
	// this SDK's onConfigure reads a stale buffer (testdata/assemblyscript).
	h := newTestHost(t, mod, Options{RootID: "peer", VMID: "vm-3", PluginConfig: []byte("{}")})
	if h.ABIVersion() != "0.2.0" {
		t.Fatalf("ABI %s, want 0.2.0", h.ABIVersion())
	}
	vm, err := h.NewVM(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer vm.Close()
	res, err := vm.Do(context.Background(), &Request{Headers: Headers{{":path", "/"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"x-peer-root-id": "peer", "x-peer-vm-id": "vm-3"} {
		if v, _ := res.Request.Headers.Get(k); v != want {
			t.Errorf("header %s = %q, want %q (headers %v)", k, v, want, res.Request.Headers)
		}
	}
	var logs []string
	h2 := newTestHost(t, mod, Options{PluginConfig: []byte("{}"), OnLog: func(e LogEntry) { logs = append(logs, e.Message) }})
	if vm, err := h2.NewVM(context.Background()); err == nil {
		vm.Close()
		t.Fatal("root id \"\": the module started")
	} else if all := err.Error() + strings.Join(logs, "\n"); !strings.Contains(all, "root id") {
		t.Fatalf("root id \"\": %v (logs %q): want the missing root id named", err, logs)
	}
}

// TestCanary: before the first worker VM, a configuration canary starts
// the plugin and is discarded without proxy_on_done or proxy_on_delete;
// the base VM only initializes (cpp-host src/wasm.cc:536-569, 571-612;
// include/proxy-wasm/wasm.h:335).
func TestCanary(t *testing.T) {
	h := newTestHost(t, otherSDK(t), Options{PluginConfig: []byte("{}")})
	vm, err := h.NewVM(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	vm.Close()
	if got, want := vmLogs(h, canaryVM), "create 1 0,vm_start 0,configure 2"; got != want {
		t.Fatalf("canary callbacks %q, want %q", got, want)
	}
	if got := vmLogs(h, baseVM); got != "" {
		t.Fatalf("base VM callbacks %q, want none", got)
	}
}

// vmLogs joins the log lines of one VM.
func vmLogs(h *Host, id int) string {
	var order []string
	for _, l := range h.Logs() {
		if l.VM == id {
			order = append(order, strings.TrimSpace(l.Message))
		}
	}
	return strings.Join(order, ",")
}

// TestTrapAndTimeout: a panic or an endless loop in the module fails that
// request only; the pool replaces the VM and the next request works.
func TestTrapAndTimeout(t *testing.T) {
	h := newTestHost(t, otherSDK(t), Options{CallTimeout: 300 * time.Millisecond})
	pool, err := h.NewPool(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for _, bad := range []string{"x-trap", "x-loop"} {
		vm, err := pool.Pick(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		_, err = vm.Do(context.Background(), &Request{Headers: Headers{{bad, "1"}}}, nil)
		if !errors.Is(err, ErrTrap) {
			t.Fatalf("%s: err %v, want ErrTrap", bad, err)
		}
		vm, err = pool.Pick(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := vm.Do(context.Background(), &Request{Headers: Headers{{"x-ok", "1"}}}, nil); err != nil {
			t.Fatalf("after %s: %v", bad, err)
		}
	}
	if pool.Replaced() != 2 {
		t.Fatalf("replaced %d VMs, want 2", pool.Replaced())
	}
}

// TestTimeoutOneProc: with a single P, a callback stuck in a loop keeps
// the P; the watchdog must still get to run and stop it (the compiled
// code has to leave native code now and then for that).
func TestTimeoutOneProc(t *testing.T) {
	h := newTestHost(t, otherSDK(t), Options{CallTimeout: 100 * time.Millisecond})
	vm, err := h.NewVM(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer vm.Close()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	start := time.Now()
	_, err = vm.Do(context.Background(), &Request{Headers: Headers{{"x-loop", "1"}}}, nil)
	if !errors.Is(err, ErrTrap) || !strings.Contains(err.Error(), "deadline exceeded") {
		t.Fatalf("err %v, want ErrTrap (deadline exceeded)", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("loop stopped after %v, limit 100ms", d)
	}
	if vm.Err() == nil {
		t.Fatal("VM not marked broken after the timeout")
	}
}

func TestLocalResponseDeferred(t *testing.T) {
	h := newTestHost(t, otherSDK(t), Options{})
	vm, err := h.NewVM(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	res, err := vm.Do(context.Background(), &Request{Headers: Headers{{"x-deny", "1"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The callback went on after send_local_response (it still set its
	// headers): the response took effect only when the callback returned.
	if res.Local == nil || res.Local.Status != 403 || string(res.Local.Body) != "denied" {
		t.Fatalf("local response %+v", res.Local)
	}
	if v, _ := res.Request.Headers.Get("x-grpc-status"); v != "12" {
		t.Fatalf("callback did not run to its end: %v", res.Request.Headers)
	}
}

func TestRejectsModuleWithoutABIMarker(t *testing.T) {
	m := teapot()
	i := strings.Index(string(m), "proxy_abi_version_0_2_1")
	copy(m[i:], "proxy_abi_version_9_9_9")
	_, err := New(context.Background(), m, Options{})
	if !errors.Is(err, ErrABIVersion) {
		t.Fatalf("err %v, want ErrABIVersion", err)
	}
}

// TestStreamDoneDoesNotWait: a stream's proxy_on_done answering false does
// not delay proxy_on_delete (cpp-host src/context.cc:242-248,
// ContextBase::destroy ignores the answer); a later proxy_done finds no
// pending root context: NotFound (src/wasm.cc:514-518).
func TestStreamDoneDoesNotWait(t *testing.T) {
	h := newTestHost(t, otherSDK(t), Options{ManualTicks: true})
	vm, err := h.NewVM(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer vm.Close()
	if _, err := vm.Do(context.Background(), &Request{Headers: Headers{{"x-defer", "1"}}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := vm.Tick(); err != nil {
		t.Fatal(err)
	}
	if got, want := vmLogs(h, vm.ID()), "log 2,done 2,delete 2,proxy_done 1"; !strings.HasSuffix(got, want) {
		t.Fatalf("callbacks %q, want them to end with %q", got, want)
	}
}
