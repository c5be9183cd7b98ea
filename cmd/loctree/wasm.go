package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/tetratelabs/wazero"

	"github.com/loctree/loctree/host"
	"github.com/loctree/loctree/host/proxy"
	"github.com/loctree/loctree/internal/fileread"
	"github.com/loctree/loctree/internal/httpserve"
	"github.com/loctree/loctree/shared"
)

// wasmOptions are the flags shared by `wasm run` and `wasm serve`.
type wasmOptions struct {
	module       string
	pluginConfig string
	vmConfig     string
	properties   []string
	upstreams    []string
	timeout      time.Duration
	logLevel     string
	cacheDir     string
	rootID, vmID string
}

func (o *wasmOptions) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.module, "module", "", "proxy-wasm module (.wasm) to run (required)")
	f.StringVar(&o.pluginConfig, "plugin-config", "", "plugin configuration: JSON text, or @FILE")
	f.StringVar(&o.vmConfig, "vm-config", "", "VM configuration: text, or @FILE")
	f.StringArrayVar(&o.properties, "property", nil, `property PATH=VALUE ("." separates segments, "\." is a literal dot); repeatable`)
	f.StringArrayVar(&o.upstreams, "upstream", nil, "proxy_http_call upstream NAME=HOST:PORT; repeatable")
	f.DurationVar(&o.timeout, "timeout", 0, "time limit of one plugin callback, e.g. 5s (0: none, as in Envoy; a limit costs time on every call)")
	f.StringVar(&o.logLevel, "log-level", "info", "Envoy log level the plugin sees (proxy_get_log_level) and below which its log lines are dropped: trace|debug|info|warn|error|critical")
	f.StringVar(&o.cacheDir, "cache-dir", "", "keep compiled modules in this directory (compile once across runs)")
	f.StringVar(&o.rootID, "root-id", "", `the plugin's root_id, the name the module registered its root context under (Envoy's default ""; Istio sets the WasmPlugin's pluginName)`)
	f.StringVar(&o.vmID, "vm-id", "", `the VM's vm_id (Envoy's default ""; Istio leaves it empty)`)
	cmd.MarkFlagRequired("module")
}

// newHost compiles the module with the options' configuration.
//
// The root id and the VM id are the plugin's, as Envoy takes them from its
// configuration: PluginConfig root_id and vm_config.vm_id, both empty
// unless set (envoy api/envoy/extensions/wasm/v3/wasm.proto; Istio sets
// root_id to the WasmPlugin's pluginName and no vm_id, pilot/pkg/model/
// extensions.go toEnvoyWasmPluginConfig). The host never passes the root id
// to a callback: proxy-wasm-cpp-host keeps it in PluginBase
// (include/proxy-wasm/context.h:43-59 at 52a02917b301c679ff43565064cffd2c3c750f6d)
// and a module reads it as the plugin_root_id property (Envoy
// source/extensions/common/wasm/context.cc, PLUGIN_ROOT_ID and
// PLUGIN_VM_ID), then picks the root context registered under it, as the
// cpp-host's null plugin does (src/null/null_plugin.cc:300-317). A module
// that registered its root context under another id than the one given
// fails to start (AssemblyScript: "Missing root context factory for root
// id"). The vm_id selects which VM a plugin shares (src/wasm.cc:92-94,
// makeVmKey); here every host has its own VMs, so it is only the property.
func (o *wasmOptions) newHost(ctx context.Context, stderr io.Writer, onLog func(host.LogEntry)) (*host.Host, error) {
	module, err := fileread.Regular(o.module, maxModuleBytes, "module")
	if err != nil {
		return nil, err
	}
	plugin, err := textOrFile(o.pluginConfig)
	if err != nil {
		return nil, fmt.Errorf("--plugin-config: %w", err)
	}
	vmConfig, err := textOrFile(o.vmConfig)
	if err != nil {
		return nil, fmt.Errorf("--vm-config: %w", err)
	}
	props := host.NewProperties()
	for _, p := range o.properties {
		path, value, ok := strings.Cut(p, "=")
		if !ok || path == "" {
			return nil, fmt.Errorf("--property %q: want PATH=VALUE", p)
		}
		props.SetString(host.SplitPath(path), value)
	}
	ups := map[string]string{}
	for _, u := range o.upstreams {
		name, addr, ok := strings.Cut(u, "=")
		if !ok || name == "" || addr == "" {
			return nil, fmt.Errorf("--upstream %q: want NAME=HOST:PORT", u)
		}
		ups[name] = addr
	}
	level, err := host.ParseLogLevel(o.logLevel)
	if err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := host.Options{
		PluginConfig: plugin, VMConfig: vmConfig, Properties: props, Upstreams: ups, CallTimeout: o.timeout,
		LogLevel: level,
		Logger:   slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		OnLog:    onLog, PluginName: "loctree", RootID: o.rootID, VMID: o.vmID,
	}
	if o.cacheDir != "" {
		if opts.Cache, err = wazero.NewCompilationCacheWithDir(o.cacheDir); err != nil {
			return nil, fmt.Errorf("--cache-dir: %w", err)
		}
	}
	return host.New(ctx, module, opts)
}

// startError adds to a failed plugin start, under Envoy's default root id
// "", that a module which registered its root context under a name (other
// SDKs, e.g. AssemblyScript's registerRootContext(..., "NAME")) needs it.
func (o *wasmOptions) startError(err error) error {
	if o.rootID != "" {
		return err
	}
	return fmt.Errorf(`%w (the plugin's root id is "", Envoy's default: a module that registered its root context under a name needs --root-id NAME, Istio's WasmPlugin pluginName)`, err)
}

// Limits of the files `wasm run` and `wasm serve` read. A configuration
// over the filter's own limit (16 MiB, filter/config_check.go) could not
// start the plugin anyway.
const (
	maxModuleBytes = 256 << 20
	maxConfigBytes = 16 << 20
)

func textOrFile(s string) ([]byte, error) {
	if name, ok := strings.CutPrefix(s, "@"); ok {
		return fileread.Regular(name, maxConfigBytes, "configuration")
	}
	return []byte(s), nil
}

func newWasmCmd() *cobra.Command {
	cmd := groupCmd(&cobra.Command{
		Use:   "wasm",
		Short: "Run proxy-wasm modules (the loctree filter or any other) in the wazero host",
	})
	cmd.AddCommand(newWasmRunCmd(), newWasmServeCmd())
	return cmd
}

// runOutput is the JSON answer of `wasm run`.
type runOutput struct {
	Action         string       `json:"action"`
	RequestHeaders [][2]string  `json:"request_headers"`
	LocalResponse  *localOutput `json:"local_response"`
	Logs           []logOutput  `json:"logs"`
	// With --count: the endpoint the filter wrote per request, and the
	// loctree filter's picks per priority (spillover services).
	Picks      map[string]int   `json:"picks,omitempty"`
	Priorities []priorityOutput `json:"priorities,omitempty"`
}

// priorityOutput is the loctree filter's count of picks in one priority
// (its loctree_picks_priority_<p>_total counter).
type priorityOutput struct {
	Priority int `json:"priority"`
	Picks    int `json:"picks"`
}

type localOutput struct {
	Status  int         `json:"status"`
	Body    string      `json:"body"`
	Headers [][2]string `json:"headers"`
}

type logOutput struct {
	Level   string `json:"level"`
	Message string `json:"message"`
}

func newWasmRunCmd() *cobra.Command {
	var (
		o       wasmOptions
		headers []string
		output  string
		count   int
	)
	cmd := &cobra.Command{
		Use:   "run --module FILE [flags]",
		Short: "Drive one request through a proxy-wasm module and print what it did",
		Long: `Run starts the module as Envoy does (base VM, configuration canary, then a
worker VM: _initialize, root context, on_vm_start, on_configure), sends one
request's headers (end of stream), ends the stream (on_log, on_done, on_delete)
and prints the action, the request headers as the plugin left them, its local
response and its logs. Any proxy-wasm module (ABI 0.1.0, 0.2.0 or 0.2.1) runs,
not only loctree's; one that Envoy would refuse to load (an import Envoy does
not offer, a callback of the wrong signature) fails with the reason.
--root-id and --vm-id are the plugin's root_id and vm_id, empty by default as
in Envoy: give --root-id the name a module registered its root context under
(Istio's WasmPlugin pluginName); the loctree filter takes any.

Examples:
  loctree wasm run --module bin/loctree.wasm \
    --plugin-config '{"topology":{"services":[{"name":"reviews","endpoints":[
      {"address":"127.0.2.1:9080","locality":{"region":"us-east"}},
      {"address":"127.0.2.2:9080","locality":{"region":"us-west"}}]}]}}' \
    --property xds.node.locality.region=us-west \
    --header :authority=reviews:9080
  loctree wasm run --module bin/loctree.wasm --plugin-config @mesh.json \
    --header :authority=reviews --count 1000   # picks per endpoint and per priority
  loctree wasm run --module other-sdk-filter.wasm --header x-user=alice -o json
  loctree wasm run --module peer.wasm --root-id peer   # a module whose root context is "peer"

With --count N it sends N requests on the same worker VM and adds the
endpoint each one was sent to ("picks") and, for the loctree filter, its
picks per priority of a spillover service ("priorities"; docs/WASM.md), the
spread loctree tree pick shows as loads.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(output, "json", "yaml"); err != nil {
				return err
			}
			if count < 1 || count > maxRunCount {
				return fmt.Errorf("--count %d: want 1 to %d", count, maxRunCount)
			}
			out, err := runOnce(cmd.Context(), &o, headers, count, cmd.ErrOrStderr())
			if out != nil {
				if werr := writeData(cmd.OutOrStdout(), output, out); werr != nil {
					return werr
				}
			}
			return err
		},
	}
	o.register(cmd)
	cmd.Flags().StringArrayVar(&headers, "header", nil, "request header NAME=VALUE (pseudo-headers too: :authority=...); repeatable")
	addFormatFlag(cmd, &output, "json", "yaml")
	cmd.Flags().IntVar(&count, "count", 1, "requests to send; with more than 1, show the picks per endpoint and per priority")
	return cmd
}

// maxRunCount bounds wasm run --count.
const maxRunCount = 1_000_000

// runOnce drives one request. On a plugin start failure it still returns
// the logs, with the error.
func runOnce(ctx context.Context, o *wasmOptions, headers []string, count int, stderr io.Writer) (*runOutput, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	out := &runOutput{RequestHeaders: [][2]string{}, Logs: []logOutput{}}
	h, err := o.newHost(ctx, stderr, func(e host.LogEntry) {
		out.Logs = append(out.Logs, logOutput{Level: e.Level.String(), Message: e.Message})
	})
	if err != nil {
		return nil, err
	}
	defer h.Close(ctx)
	req, err := parseHeaders(headers)
	if err != nil {
		return nil, err
	}
	vm, err := h.NewVM(ctx)
	if err != nil {
		return out, o.startError(err)
	}
	defer vm.Close()
	if err := drive(vm, slices.Clone(req), out); err != nil {
		return out, err
	}
	if count > 1 {
		if err := driveMore(vm, req, count, out, h.Metrics()); err != nil {
			return out, err
		}
	}
	if _, set := headerOf(out.RequestHeaders, endpointHeader); !set {
		if note := runNote(h.Shared(), o.properties, req); note != nil {
			out.Logs = append(out.Logs, *note)
		}
	}
	return out, nil
}

func headerOf(h [][2]string, key string) (string, bool) {
	for _, kv := range h {
		if kv[0] == key {
			return kv[1], true
		}
	}
	return "", false
}

func drive(vm *host.VM, req host.Headers, out *runOutput) error {
	s, err := vm.NewStream(nil)
	if err != nil {
		return err
	}
	action, err := s.RequestHeaders(req, true)
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	out.Action = action.String()
	reqHeaders, _ := s.Headers()
	out.RequestHeaders = append(out.RequestHeaders, reqHeaders...)
	if l := s.LocalResponse(); l != nil {
		out.LocalResponse = &localOutput{Status: l.Status, Body: string(l.Body), Headers: append([][2]string{}, l.Headers...)}
	}
	return nil
}

// endpointHeader is the header the loctree filter writes its pick into
// (its default header setting).
const endpointHeader = "x-gateway-destination-endpoint"

// driveMore sends count−1 more requests after the first and fills in the
// picks per endpoint and, after a tick flushes the loctree filter's
// counters, its picks per priority.
func driveMore(vm *host.VM, req host.Headers, count int, out *runOutput, m *host.Metrics) error {
	out.Picks = map[string]int{}
	if v, ok := headerOf(out.RequestHeaders, endpointHeader); ok {
		out.Picks[v]++
	}
	for range count - 1 {
		s, err := vm.NewStream(nil)
		if err != nil {
			return err
		}
		_, err = s.RequestHeaders(slices.Clone(req), true)
		h, _ := s.Headers()
		if cerr := s.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		if v, ok := headerOf(h, endpointHeader); ok {
			out.Picks[v]++
		}
	}
	if err := vm.Tick(); err != nil {
		return err
	}
	for p := range shared.MaxPriorities {
		if n, ok := m.Value(fmt.Sprintf("loctree_picks_priority_%d_total", p)); ok && n > 0 {
			out.Priorities = append(out.Priorities, priorityOutput{Priority: p, Picks: int(n)})
		}
	}
	return nil
}

// parseHeaders reads NAME=VALUE flags and adds the pseudo-headers Envoy
// always has (:method GET, :path /, :scheme http) when missing.
func parseHeaders(flags []string) (host.Headers, error) {
	var h host.Headers
	for _, f := range flags {
		i := strings.Index(f[min(1, len(f)):], "=") + min(1, len(f)) // a name may start with ':'
		if i <= 0 {
			return nil, fmt.Errorf("--header %q: want NAME=VALUE", f)
		}
		h.Add(f[:i], f[i+1:])
	}
	var out host.Headers
	for _, kv := range (host.Headers{{":method", "GET"}, {":path", "/"}, {":scheme", "http"}}) {
		if _, ok := h.Get(kv[0]); !ok {
			out = append(out, kv)
		}
	}
	return append(out, h...), nil
}

// serveOptions are the flags of `wasm serve` beyond wasmOptions.
type serveOptions struct {
	listen, header string
	workers        int
	limits         httpserve.Limits
}

func newWasmServeCmd() *cobra.Command {
	var (
		o  wasmOptions
		so serveOptions
	)
	cmd := &cobra.Command{
		Use:   "serve --module FILE --listen 127.0.0.1:PORT [flags]",
		Short: "Reverse proxy that runs the filter on each request and forwards where it says",
		Long: `Serve runs one VM per worker, passes each request through the filter and
forwards it to the endpoint the filter wrote into --endpoint-header, only if that
address is an endpoint of the tree the loctree filter published; anything else
gets 502, whose body says why: no tree yet (the filter has not loaded one),
an unknown host (no service of the tree answers to the request's
:authority), or an address outside the tree. The filter's local responses
(e.g. strict-mode 503) are sent as is.

On shutdown it prints the filter's picks per priority of spillover services
(docs/WASM.md, loctree_picks_priority_<p>_total), the spread loctree tree pick
shows as loads.

Examples:
  loctree wasm serve --module bin/loctree.wasm --listen 127.0.0.1:15001 \
    --plugin-config '{"tree":{"cluster":"agent"}}' --upstream agent=127.0.0.1:15099`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := so.check(); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(contextOf(cmd), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return serve(ctx, &o, &so, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o.register(cmd)
	f := cmd.Flags()
	f.StringVar(&so.listen, "listen", "127.0.0.1:15001", "address to listen on")
	f.StringVar(&so.header, "endpoint-header", "x-gateway-destination-endpoint", "header the filter writes the endpoint into (its header setting)")
	f.StringVar(&so.header, "header", "x-gateway-destination-endpoint", "")
	_ = f.MarkDeprecated("header", "use --endpoint-header (--header is a request header in wasm run)")
	f.IntVar(&so.workers, "workers", 2, fmt.Sprintf("VMs (Envoy worker threads), 1..%d", maxWorkers))
	f.IntVar(&so.limits.MaxConns, "max-connections", httpserve.Default.MaxConns, "client connections open at once (at most half the open-file limit); more wait")
	f.DurationVar(&so.limits.Idle, "idle-timeout", httpserve.Default.Idle, "close a keep-alive connection idle this long")
	return cmd
}

func (so *serveOptions) check() error {
	if so.workers < 1 || so.workers > maxWorkers {
		return fmt.Errorf("--workers %d: must be 1..%d (each worker is a VM with its own memory)", so.workers, maxWorkers)
	}
	if so.limits.MaxConns < 1 || so.limits.MaxConns > maxConnections {
		return fmt.Errorf("--max-connections %d: must be 1..%d", so.limits.MaxConns, maxConnections)
	}
	if so.limits.Idle <= 0 {
		return fmt.Errorf("--idle-timeout %s: must be positive", so.limits.Idle)
	}
	return nil
}

// maxWorkers bounds --workers: every worker is a wazero VM with its own
// linear memory and copy of the tree.
const maxWorkers = 64

// maxConnections bounds --max-connections (the listener also stays under
// half the open-file limit).
const maxConnections = 1 << 16

func contextOf(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}

func serve(ctx context.Context, o *wasmOptions, so *serveOptions, stdout, stderr io.Writer) error {
	log := slog.New(slog.NewTextHandler(stderr, nil))
	h, err := o.newHost(ctx, stderr, nil)
	if err != nil {
		return err
	}
	defer h.Close(context.Background())
	pool, err := h.NewPool(ctx, so.workers)
	if err != nil {
		return o.startError(err)
	}
	defer pool.Close()
	allow := &proxy.TreeAllowlist{Shared: h.Shared()}
	proxy := &proxy.Proxy{Pool: pool, Header: strings.ToLower(so.header), Allowed: allow.Allowed, Log: log,
		Explain: serveExplain(h.Shared())}
	ln, err := httpserve.Listen(so.listen, so.limits.MaxConns)
	if err != nil {
		return err
	}
	srv := httpserve.New(proxy, so.limits)
	fmt.Fprintf(stdout, "loctree wasm serve: listening on http://%s (%d workers, ABI %s)\n", ln.Addr(), so.workers, h.ABIVersion())
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shut)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	if err := pool.Tick(); err == nil { // flushes the filter's per-request counters
		printPriorities(stdout, h.Metrics())
	}
	return nil
}

// printPriorities prints, at the end of wasm serve, the loctree filter's
// picks per priority of spillover services, if it made any.
func printPriorities(w io.Writer, m *host.Metrics) {
	var parts []string
	var counts []uint64
	total := uint64(0)
	for p := range shared.MaxPriorities {
		n, _ := m.Value(fmt.Sprintf("loctree_picks_priority_%d_total", p))
		counts = append(counts, n)
		total += n
	}
	if total == 0 {
		return
	}
	for p, n := range counts {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("P%d %d (%.1f%%)", p, n, 100*float64(n)/float64(total)))
		}
	}
	fmt.Fprintf(w, "loctree wasm serve: picks by priority: %s\n", strings.Join(parts, ", "))
}
