package host

import (
	"context"
)

// VM numbers of the VMs that are not workers.
const (
	baseVM   = 0  // the base VM, initialized once and kept
	canaryVM = -1 // the configuration canary, discarded after on_configure
)

// prepare runs once per host what Envoy runs before its worker VMs
// (cpp-host src/wasm.cc:571-612, createWasm): the base VM, instantiated and
// initialized and kept for the host's life, then the configuration canary
// (src/wasm.cc:536-569, WasmHandleBase::canary): a VM that runs
// proxy_on_vm_start and proxy_on_configure and is discarded without
// proxy_on_done. Its answer is cached as cpp-host caches it
// (plugin_canary_cache_): a bad plugin configuration fails here, once.
func (h *Host) prepare(ctx context.Context) error {
	h.prepMu.Lock()
	defer h.prepMu.Unlock()
	if h.prepared {
		return h.prepErr
	}
	h.prepared = true
	if _, h.prepErr = h.startVM(ctx, baseVM, false); h.prepErr != nil {
		return h.prepErr
	}
	canary, err := h.startVM(ctx, canaryVM, true)
	if err != nil {
		h.prepErr = err
		return err
	}
	canary.discard()
	return nil
}

// discard drops the VM without calling into it, as cpp-host's
// WasmHandleBase::kill does (include/proxy-wasm/wasm.h:335).
func (vm *VM) discard() {
	vm.mu.Lock()
	vm.rootCreated = false // no proxy_on_done / proxy_on_delete
	vm.mu.Unlock()
	vm.Close()
}
