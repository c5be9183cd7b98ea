package host

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"
)

// VM is one instance of the module with its root (plugin) context, as one
// Envoy worker thread owns one. Callbacks into a VM are serialized; streams
// on one VM interleave between callbacks as they do on an Envoy worker.
type VM struct {
	h      *Host
	id     int
	mod    api.Module
	mem    api.Memory
	ctx    context.Context // carries the VM for hostcalls; done when the VM closes
	cancel context.CancelFunc
	// runCtx is the context of callbacks after start: it carries the VM
	// and is never done; with a time limit the watchdog closes the module
	// instead of cancelling a context.
	// busySince is the start of the running callback (unix ns), 0 when
	// idle.
	runCtx    context.Context
	busySince atomic.Int64
	fn        callbacks

	mu        sync.Mutex
	rootID    uint32
	nextID    uint32
	streams   map[uint32]*Stream
	effective uint32
	stack     [12]uint64
	broken    error
	released  bool // the instance is gone
	draining  bool // the root answered proxy_on_done false and waits for proxy_done
	// rootDone: the pending root called proxy_done; proxy_on_delete and the
	// release follow when the callback returns.
	rootDone bool
	// rootCreated: the plugin's root context exists (not in a base VM).
	rootCreated bool
	configuring bool // inside proxy_on_configure
	// configureLog is the last warning or error the plugin logged inside
	// proxy_on_configure: the reason ErrPluginStart gives.
	configureLog string
	logging      bool // inside a stream's proxy_on_log

	tickPeriod time.Duration
	tickStop   chan struct{}

	calls    sync.WaitGroup
	nextCall uint32
	callResp *callResponse
	deferred []*Stream
	allocCtx context.Context
	// allocStack is the allocator's argument and result (alloc is never
	// re-entered: the module's allocator may call no hostcall that
	// allocates).
	allocStack [1]uint64
	// allowed, when set, is the only host functions the running phase
	// (phase) may call; see restrict.
	allowed map[string]bool
	phase   string
}

// NewVM starts a worker VM as Envoy does: the module is instantiated,
// initialized (`_initialize` then `main` or `__main_void`, or `_start`),
// then proxy_on_context_create(root), proxy_on_vm_start and
// proxy_on_configure. The host's first VM is preceded by the base VM and
// the configuration canary (see prepare); a plugin the canary rejected fails
// every NewVM with the canary's error. A false from either start callback
// fails with ErrVMStart / ErrPluginStart; the host keeps working.
func (h *Host) NewVM(ctx context.Context) (*VM, error) {
	if err := h.prepare(ctx); err != nil {
		return nil, err
	}
	return h.startVM(ctx, int(h.nextVM.Add(1)), true)
}

// startVM instantiates the module as VM id and initializes it; with
// plugin it also starts the plugin (root context, on_vm_start,
// on_configure).
func (h *Host) startVM(ctx context.Context, id int, plugin bool) (*VM, error) {
	vm := &VM{h: h, id: id, rootID: 1, nextID: 1, streams: map[uint32]*Stream{}}
	vm.ctx, vm.cancel = context.WithCancel(context.WithValue(context.Background(), vmKey{}, vm))
	cfg := wazero.NewModuleConfig().WithName(fmt.Sprintf("vm%+d", id)).WithStartFunctions()
	mod, err := h.runtime.InstantiateModule(ctx, h.compiled, cfg)
	if err != nil {
		vm.cancel()
		return nil, fmt.Errorf("instantiate vm %d: %w", id, err)
	}
	vm.mod, vm.mem = mod, mod.Memory()
	h.track(vm, true)
	vm.runCtx = context.WithValue(context.Background(), vmKey{}, vm)
	if h.opts.CallTimeout > 0 && plugin {
		go vm.watch(h.opts.CallTimeout)
	}
	if err := vm.start(plugin); err != nil {
		vm.discard() // a VM that failed to start is dropped, not shut down (cpp-host src/wasm.cc:555-565)
		return nil, err
	}
	return vm, nil
}

func (vm *VM) start(plugin bool) error {
	if err := vm.fn.bind(vm.mod, vm.h.abi); err != nil {
		return fmt.Errorf("vm %d: %w", vm.id, err)
	}
	vm.mu.Lock()
	defer vm.mu.Unlock()
	ctx, cancel := vm.ctx, context.CancelFunc(func() {})
	if vm.h.opts.CallTimeout > 0 && vm.h.opts.StartTimeout > 0 {
		ctx, cancel = context.WithTimeout(vm.ctx, vm.h.opts.StartTimeout)
	}
	defer cancel()
	if err := vm.initialize(ctx); err != nil || !plugin {
		return err
	}
	vm.rootCreated = true
	if _, err := vm.call(ctx, vm.fn.contextCreate, uint64(vm.rootID), 0); err != nil {
		return err
	}
	if ok, err := vm.call(ctx, vm.fn.vmStart, uint64(vm.rootID), uint64(len(vm.h.opts.VMConfig))); err != nil {
		return err
	} else if vm.fn.vmStart != nil && uint32(ok) == 0 {
		return fmt.Errorf("vm %d: %w", vm.id, ErrVMStart)
	}
	vm.configuring = true
	ok, err := vm.call(ctx, vm.fn.configure, uint64(vm.rootID), uint64(len(vm.h.opts.PluginConfig)))
	vm.configuring = false
	if err != nil {
		return err
	}
	if vm.fn.configure != nil && uint32(ok) == 0 {
		vm.h.log.Error("wasm plugin start failed: proxy_on_configure returned false; check the plugin configuration and the plugin's log", "vm", vm.id)
		if vm.configureLog != "" {
			return fmt.Errorf("vm %d: %w: the plugin logged: %s", vm.id, ErrPluginStart, vm.configureLog)
		}
		return fmt.Errorf("vm %d: %w", vm.id, ErrPluginStart)
	}
	return nil
}

// initialize runs the module's start functions as cpp-host's
// WasmBase::startVm does (src/wasm.cc:379-459): `_initialize` then `main`
// (or `__main_void`), else `_start`, with only the start allow-list of host
// functions callable.
func (vm *VM) initialize(ctx context.Context) error {
	defer vm.restrict("start", startAllowed)()
	c := &vm.fn
	if c.initialize == nil {
		_, err := vm.call(ctx, c.start)
		return err
	}
	if _, err := vm.call(ctx, c.initialize); err != nil {
		return err
	}
	if c.main != nil {
		_, err := vm.call(ctx, c.main, 0, 0)
		return err
	}
	_, err := vm.call(ctx, c.mainVoid)
	return err
}

// watch closes the module when a callback runs longer than CallTimeout
// (checked every quarter limit). The module is compiled with
// WithCloseOnContextDone, so its code checks the closed flag at every loop
// header and the running callback fails with ErrTrap (exit code
// "deadline exceeded"); the VM is then replaced. Calls use a context that
// is never done, so a wazero that skips its watcher goroutine for such
// contexts (v1.12.0 starts one per call anyway; wazero/wazero#2466) makes
// the limit nearly free.
func (vm *VM) watch(limit time.Duration) {
	t := time.NewTicker(max(limit/4, 5*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-vm.ctx.Done():
			return
		case <-t.C:
			if since := vm.busySince.Load(); since != 0 && time.Since(time.Unix(0, since)) > limit {
				vm.h.log.Warn("wasm callback over the time limit; closing the module", "vm", vm.id, "limit", limit)
				vm.mod.CloseWithExitCode(context.Background(), sys.ExitCodeDeadlineExceeded)
				return
			}
		}
	}
}

// call invokes a module export; a nil f is an absent optional callback.
// Any error (trap, timeout, exit) breaks the VM. vm.mu must be held.
func (vm *VM) call(ctx context.Context, f api.Function, args ...uint64) (uint64, error) {
	if vm.broken != nil {
		return 0, vm.broken
	}
	if f == nil {
		return 0, nil
	}
	n := copy(vm.stack[:], args)
	clear(vm.stack[n:])
	if ctx == vm.runCtx && vm.h.opts.CallTimeout > 0 { // the watchdog reads it
		vm.busySince.Store(time.Now().UnixNano())
		defer vm.busySince.Store(0)
	}
	if err := f.CallWithStack(ctx, vm.stack[:]); err != nil {
		vm.broken = fmt.Errorf("%w: vm %d: %s: %w", ErrTrap, vm.id, f.Definition().Name(), err)
		vm.h.log.Error("wasm VM broken; it will be replaced", "vm", vm.id, "err", firstLine(err.Error()))
		vm.stopTicks()
		return 0, vm.broken
	}
	return vm.stack[0], nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// ID returns the VM's number within its host (1, 2, ...).
func (vm *VM) ID() int { return vm.id }

// Err returns the error that broke the VM, or nil while it is healthy.
func (vm *VM) Err() error {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	return vm.broken
}

// Close ends the plugin as Envoy does at shutdown (cpp-host
// src/wasm.cc:502-512, WasmBase::startShutdown): proxy_on_done on the root
// context, then proxy_on_delete, stops the VM's timer and releases the
// instance. A root whose proxy_on_done answers false keeps its VM (ticks,
// HTTP call responses) until it calls proxy_done; new streams are refused
// meanwhile, and a second Close releases it without waiting.
func (vm *VM) Close() error {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	switch {
	case vm.released:
		return nil
	case vm.draining: // do not wait any longer
		return vm.release()
	}
	if vm.broken == nil && vm.rootCreated {
		vm.effective = vm.rootID
		done, err := vm.call(vm.runCtx, vm.fn.done, uint64(vm.rootID))
		if err == nil && vm.fn.done != nil && uint32(done) == 0 {
			vm.draining = true // pending until proxy_done (hcDone, afterCall)
			return nil
		}
		if err == nil {
			vm.call(vm.runCtx, vm.fn.delete, uint64(vm.rootID))
		}
	}
	return vm.release()
}

// release stops the VM and frees its instance. vm.mu is held.
func (vm *VM) release() error {
	vm.released, vm.draining = true, false
	if vm.broken == nil {
		vm.broken = fmt.Errorf("vm %d: closed: %w", vm.id, ErrVMBroken)
	}
	vm.stopTicks()
	vm.cancel()
	vm.h.track(vm, false)
	return vm.mod.Close(context.Background())
}

// Tick calls proxy_on_tick on the root context now.
func (vm *VM) Tick() error {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	ctx := vm.runCtx
	vm.effective = vm.rootID
	_, err := vm.call(ctx, vm.fn.tick, uint64(vm.rootID))
	vm.afterCall()
	return err
}

// WaitHTTPCalls waits until every proxy_http_call issued so far has been
// answered through proxy_on_http_call_response (or dropped).
func (vm *VM) WaitHTTPCalls() { vm.calls.Wait() }

// setTick (re)starts the tick timer. vm.mu is held.
func (vm *VM) setTick(period time.Duration) {
	vm.stopTicks()
	vm.tickPeriod = period
	if period <= 0 || vm.h.opts.ManualTicks {
		return
	}
	stop := make(chan struct{})
	vm.tickStop = stop
	go func() {
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if vm.Tick() != nil {
					return
				}
			}
		}
	}()
}

func (vm *VM) stopTicks() {
	if vm.tickStop != nil {
		close(vm.tickStop)
		vm.tickStop = nil
	}
}

// TickPeriod returns the period the module asked for (0 if none).
func (vm *VM) TickPeriod() time.Duration {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	return vm.tickPeriod
}

// afterCall applies actions deferred to the end of a callback (local
// responses). vm.mu is held.
func (vm *VM) afterCall() {
	for _, s := range vm.deferred {
		s.applyDeferred()
	}
	vm.deferred = vm.deferred[:0]
	if vm.rootDone {
		vm.rootDone = false
		vm.effective = vm.rootID
		vm.call(vm.runCtx, vm.fn.delete, uint64(vm.rootID))
		vm.release()
	}
}

// MemorySize returns the size of the VM's linear memory in bytes.
func (vm *VM) MemorySize() uint32 { return vm.mem.Size() }

// CallExport calls the module's exported function name, one outside the
// proxy-wasm ABI such as a test build's debug hook, with the root context
// effective, and returns its first result (0 if it has none). Like a
// callback it runs serialized with the VM's other callbacks and a trap
// breaks the VM. A missing export is an error; the VM stays healthy.
func (vm *VM) CallExport(name string, args ...uint64) (uint64, error) {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	f := vm.mod.ExportedFunction(name)
	if f == nil {
		return 0, fmt.Errorf("vm %d: no exported function %q", vm.id, name)
	}
	if len(args) > len(vm.stack) {
		return 0, fmt.Errorf("vm %d: %s: %d arguments, at most %d", vm.id, name, len(args), len(vm.stack))
	}
	vm.effective = vm.rootID
	r, err := vm.call(vm.runCtx, f, args...)
	vm.afterCall()
	return r, err
}
