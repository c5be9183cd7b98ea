package host

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
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
	// CallTimeout bounds one stream's filter work, one tick or one HTTP
	// call response callback. 0 means 5s; negative disables the limit (and
	// the per-call cost of enforcing it).
	CallTimeout time.Duration
	// StartTimeout bounds a VM's start (initialisation, on_vm_start,
	// on_configure), which may parse and build a large configuration.
	// 0 means 60s; negative disables it (when CallTimeout does too).
	StartTimeout time.Duration
	// ManualTicks disables the tick timer; call VM.Tick instead (tests).
	ManualTicks bool
	// HTTPClient sends proxy_http_call requests; nil means a default client.
	HTTPClient *http.Client
	// Logger receives the module's logs and the host's own; nil discards.
	Logger *slog.Logger
	// OnLog, if set, sees every log line of every VM.
	OnLog func(LogEntry)
	// Cache, if set, keeps compiled code across hosts (tests, CLIs).
	Cache wazero.CompilationCache
}

// LogEntry is one log line written by a module through proxy_log (or to
// stdout/stderr, logged at info/error as Envoy does).
type LogEntry struct {
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

	vmMu sync.Mutex
	vms  map[*VM]struct{} // open VMs, closed with the host
}

const maxKeptLogs = 4096

// New compiles module and prepares the host imports. It returns
// ErrABIVersion when the module exports neither proxy_abi_version_0_2_1 nor
// proxy_abi_version_0_2_0.
func New(ctx context.Context, module []byte, opts Options) (*Host, error) {
	if opts.CallTimeout == 0 {
		opts.CallTimeout = 5 * time.Second
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = time.Minute
	}
	h := &Host{
		opts: opts, log: opts.Logger, shared: newSharedData(), queues: newQueues(),
		metrics: newMetrics(), props: opts.Properties, client: opts.HTTPClient,
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
	exports := compiled.ExportedFunctions()
	for _, v := range []string{"0_2_1", "0_2_0"} {
		if _, ok := exports["proxy_abi_version_"+v]; ok {
			h.abi = v
			break
		}
	}
	if h.abi == "" {
		return fmt.Errorf("%w: the module exports no proxy_abi_version_0_2_1 or proxy_abi_version_0_2_0", ErrABIVersion)
	}
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, h.runtime); err != nil {
		return fmt.Errorf("instantiate wasi: %w", err)
	}
	if err := h.instantiateImports(ctx); err != nil {
		return fmt.Errorf("instantiate proxy-wasm imports: %w", err)
	}
	return nil
}

// ABIVersion returns the ABI version the module declared, e.g. "0.2.1".
func (h *Host) ABIVersion() string {
	if h.abi == "0_2_1" {
		return "0.2.1"
	}
	return "0.2.0"
}

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

// Close closes every open VM (ending their plugins), then the runtime.
func (h *Host) Close(ctx context.Context) error {
	h.vmMu.Lock()
	vms := make([]*VM, 0, len(h.vms))
	for vm := range h.vms {
		vms = append(vms, vm)
	}
	h.vmMu.Unlock()
	for _, vm := range vms {
		vm.Close()
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

// instantiateImports registers the "env" module with every proxy-wasm
// hostcall.
func (h *Host) instantiateImports(ctx context.Context) error {
	b := h.runtime.NewHostModuleBuilder("env")
	for _, f := range hostcalls() {
		fn, params := f.fn, f.params
		b.NewFunctionBuilder().
			WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, mod api.Module, stack []uint64) {
				vm, _ := ctx.Value(vmKey{}).(*VM)
				if vm == nil {
					stack[0] = uint64(StatusInternalFailure)
					return
				}
				vm.allocCtx = ctx
				for i, t := range params { // an i32 may arrive with garbage above bit 31
					if t == api.ValueTypeI32 {
						stack[i] = uint64(uint32(stack[i]))
					}
				}
				stack[0] = uint64(fn(vm, stack))
			}), f.params, []api.ValueType{api.ValueTypeI32}).
			Export(f.name)
	}
	_, err := b.Instantiate(ctx)
	return err
}

type vmKey struct{}
