package host

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// Options configure a Host. The zero value is usable.
type Options struct {
	// PluginConfig is the plugin configuration (read in proxy_on_configure).
	PluginConfig []byte
	// VMConfig is the VM configuration (read in proxy_on_vm_start).
	VMConfig []byte
	// PluginName, RootID and VMID answer the plugin_name, plugin_root_id and
	// plugin_vm_id properties.
	PluginName, RootID, VMID string
	// Properties are node- and plugin-level properties (xds.node.*, ...),
	// read by every VM. A stream may add its own (xds.cluster_name, ...).
	Properties *Properties
	// Upstreams maps upstream (cluster) names used by proxy_http_call to
	// real HTTP addresses, "host:port" or "http://host:port".
	Upstreams map[string]string
	// CallTimeout, if positive, bounds one stream's filter work, one tick
	// or one HTTP call response callback: a callback over it closes the
	// module and the VM is replaced. It is not an Envoy feature and costs
	// time on every call (docs/PERFORMANCE.md), so it is off by default
	// (0 or negative).
	CallTimeout time.Duration
	// StartTimeout bounds a VM's start (initialisation, on_vm_start,
	// on_configure) when CallTimeout is on. 0 means 60s; negative disables
	// it.
	StartTimeout time.Duration
	// ManualTicks disables the tick timer; call VM.Tick instead (tests).
	ManualTicks bool
	// HTTPClient sends proxy_http_call requests; nil means a default client.
	HTTPClient *http.Client
	// LogLevel is Envoy's log level for the plugin: proxy_get_log_level
	// reports it and module log lines below it are dropped. The zero value
	// is LogTrace (everything); Envoy's default is LogInfo.
	LogLevel LogLevel
	// Logger receives the module's logs and the host's own; nil discards.
	Logger *slog.Logger
	// OnLog, if set, sees every log line of every VM.
	OnLog func(LogEntry)
	// Cache, if set, keeps compiled code across hosts (tests, CLIs).
	Cache wazero.CompilationCache
	// StatTags are the proxy's stats_tags (IstioStatTags for an Istio
	// proxy): Metrics().Snapshot() names each metric as Envoy's Prometheus
	// output would, with the tags taken out of its name.
	StatTags []StatTag
}

// LogEntry is one log line written by a module through proxy_log (or to
// stdout/stderr, logged at info/error as Envoy does).
type LogEntry struct {
	// VM is the worker VM's number (1, 2, ...); 0 is the base VM and -1 the
	// configuration canary.
	VM      int
	Level   LogLevel
	Message string
}

// Host runs one compiled proxy-wasm module; see the package documentation.
type Host struct {
	opts     Options
	log      *slog.Logger
	runtime  wazero.Runtime
	compiled wazero.CompiledModule
	abi      string
	shared   *SharedData
	queues   *queues
	metrics  *Metrics
	props    *Properties
	client   *http.Client
	nextVM   atomic.Int64

	logMu sync.Mutex
	logs  []LogEntry

	prepMu   sync.Mutex // serialises prepare
	prepared bool
	prepErr  error // the base VM's or the canary's failure

	vmMu sync.Mutex
	vms  map[*VM]struct{} // open VMs, closed with the host
}

const maxKeptLogs = 4096

// New compiles module and prepares the host imports. It returns
// ErrABIVersion when the module exports neither proxy_abi_version_0_2_1 nor
// proxy_abi_version_0_2_0.
func New(ctx context.Context, module []byte, opts Options) (*Host, error) {
	if opts.StartTimeout == 0 {
		opts.StartTimeout = time.Minute
	}
	h := &Host{
		opts: opts, log: opts.Logger, shared: newSharedData(), queues: newQueues(),
		metrics: newMetrics(opts.StatTags), props: opts.Properties, client: opts.HTTPClient,
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.props == nil {
		h.props = NewProperties()
	}
	if h.client == nil {
		h.client = &http.Client{}
	}
	cfg := wazero.NewRuntimeConfigCompiler().WithCloseOnContextDone(opts.CallTimeout > 0)
	if opts.Cache != nil {
		cfg = cfg.WithCompilationCache(opts.Cache)
	}
	h.runtime = wazero.NewRuntimeWithConfig(ctx, cfg)
	if err := h.init(ctx, module); err != nil {
		h.runtime.Close(ctx)
		return nil, err
	}
	return h, nil
}

func (h *Host) init(ctx context.Context, module []byte) error {
	compiled, err := h.runtime.CompileModule(ctx, module)
	if err != nil {
		return fmt.Errorf("compile wasm module: %w", err)
	}
	h.compiled = compiled
	if h.abi = abiOf(compiled); h.abi == "" {
		return fmt.Errorf("%w: the module exports none of proxy_abi_version_0_2_1, _0_2_0 or _0_1_0", ErrABIVersion)
	}
	offered := h.offered()
	if err := checkImports(compiled, offered); err != nil {
		return err
	}
	for _, module := range []string{"env", wasiModules[0], wasiModules[1]} {
		if err := h.link(ctx, module, offered[module]); err != nil {
			return fmt.Errorf("instantiate host module %s: %w", module, err)
		}
	}
	return nil
}

// ABI versions a module may declare, most recent first.
const (
	abi021 = "0_2_1"
	abi020 = "0_2_0"
	abi010 = "0_1_0"
)

// abiOf returns the ABI version the module's proxy_abi_version_* export
// names (cpp-host src/bytecode_util.cc getAbiVersion), or "".
func abiOf(m wazero.CompiledModule) string {
	exports := m.ExportedFunctions()
	for _, v := range []string{abi021, abi020, abi010} {
		if _, ok := exports["proxy_abi_version_"+v]; ok {
			return v
		}
	}
	return ""
}

// offered returns the host functions by import module for the module's ABI.
func (h *Host) offered() map[string][]hostFunc {
	return map[string][]hostFunc{
		"env":          hostcallsFor(h.abi),
		wasiModules[0]: wasi(wasiModules[0]),
		wasiModules[1]: wasi(wasiModules[1]),
	}
}

// checkImports fails, naming the import, when the module imports a
// function the host does not offer for its ABI version or with another
// signature (cpp-host src/v8/v8.cc:385-406, V8::link).
func checkImports(m wazero.CompiledModule, offered map[string][]hostFunc) error {
	for _, imp := range m.ImportedFunctions() {
		module, name, _ := imp.Import()
		f := findHostFunc(offered[module], name)
		if f == nil {
			return fmt.Errorf("%w: %s.%s", ErrMissingImport, module, name)
		}
		if sig(imp.ParamTypes()) != sig(f.paramTypes()) || sig(imp.ResultTypes()) != sig(f.results) {
			return fmt.Errorf("%w: %s.%s: the module wants (%s) -> (%s), the host offers (%s) -> (%s)", ErrImportType,
				module, name, sig(imp.ParamTypes()), sig(imp.ResultTypes()), sig(f.paramTypes()), sig(f.results))
		}
	}
	return nil
}

func findHostFunc(fs []hostFunc, name string) *hostFunc {
	for i := range fs {
		if fs[i].name == name {
			return &fs[i]
		}
	}
	return nil
}

// sig renders value types as "i32,i64".
func sig(ts []api.ValueType) string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = api.ValueTypeName(t)
	}
	return strings.Join(names, ",")
}

// ABIVersion returns the ABI version the module declared, e.g. "0.2.1".
func (h *Host) ABIVersion() string { return strings.ReplaceAll(h.abi, "_", ".") }

// Shared returns the host-wide shared data store.
func (h *Host) Shared() *SharedData { return h.shared }

// Metrics returns the host-wide metric registry.
func (h *Host) Metrics() *Metrics { return h.metrics }

// Properties returns the node-level properties.
func (h *Host) Properties() *Properties { return h.props }

// Logs returns a copy of the most recent log lines (up to 4096).
func (h *Host) Logs() []LogEntry {
	h.logMu.Lock()
	defer h.logMu.Unlock()
	return append([]LogEntry(nil), h.logs...)
}

// Close closes every open VM (ending their plugins, without waiting for a
// root's proxy_done), then the runtime.
func (h *Host) Close(ctx context.Context) error {
	h.vmMu.Lock()
	vms := make([]*VM, 0, len(h.vms))
	for vm := range h.vms {
		vms = append(vms, vm)
	}
	h.vmMu.Unlock()
	for _, vm := range vms {
		vm.Close()
		vm.Close() // releases a root still waiting for proxy_done
	}
	return h.runtime.Close(ctx)
}

func (h *Host) track(vm *VM, open bool) {
	h.vmMu.Lock()
	defer h.vmMu.Unlock()
	if h.vms == nil {
		h.vms = map[*VM]struct{}{}
	}
	if open {
		h.vms[vm] = struct{}{}
	} else {
		delete(h.vms, vm)
	}
}

func (h *Host) emit(e LogEntry) {
	if e.Level < h.opts.LogLevel {
		return
	}
	h.logMu.Lock()
	if len(h.logs) >= maxKeptLogs {
		h.logs = h.logs[1:]
	}
	h.logs = append(h.logs, e)
	h.logMu.Unlock()
	if h.opts.OnLog != nil {
		h.opts.OnLog(e)
	}
	h.log.Log(context.Background(), slogLevel(e.Level), e.Message, "vm", e.VM, "source", "wasm")
}

func slogLevel(l LogLevel) slog.Level {
	switch {
	case l <= LogDebug:
		return slog.LevelDebug
	case l == LogInfo:
		return slog.LevelInfo
	case l == LogWarn:
		return slog.LevelWarn
	}
	return slog.LevelError
}

// link instantiates one host module with fs.
func (h *Host) link(ctx context.Context, module string, fs []hostFunc) error {
	b := h.runtime.NewHostModuleBuilder(module)
	for i := range fs {
		f := &fs[i]
		b.NewFunctionBuilder().WithGoModuleFunction(f.goFunc(), f.paramTypes(), f.results).
			WithParameterNames(f.paramNames()...).Export(f.name)
	}
	_, err := b.Instantiate(ctx)
	return err
}

// goFunc adapts f to wazero: it finds the calling VM, enforces the
// restricted phases (start, allocation) and clears the bits above 31 of
// i32 arguments.
func (f *hostFunc) goFunc() api.GoModuleFunc {
	name, params, call := f.qualified(), f.params, f.call
	return func(ctx context.Context, _ api.Module, stack []uint64) {
		vm, _ := ctx.Value(vmKey{}).(*VM)
		if vm == nil {
			stack[0] = uint64(StatusInternalFailure)
			return
		}
		if vm.allowed != nil && !vm.allowed[name] {
			panic(fmt.Errorf("%w: %s called %s", ErrRestricted, vm.phase, name))
		}
		vm.allocCtx = ctx
		for i, p := range params {
			if p.typ == api.ValueTypeI32 {
				stack[i] = uint64(uint32(stack[i]))
			}
		}
		call(vm, stack)
	}
}

type vmKey struct{}
