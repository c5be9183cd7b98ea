package host

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// Pool is a fixed set of VMs, one per worker, as Envoy runs one VM per
// worker thread. Pick hands out VMs round robin; a VM that trapped or timed
// out is replaced by a fresh one (started from scratch) the next time its
// slot is picked.
type Pool struct {
	h    *Host
	mu   sync.Mutex
	vms  []*VM
	next atomic.Uint64
	// Replaced counts VMs replaced after a trap or timeout.
	replaced atomic.Int64
}

// NewPool starts n VMs (at least one). It fails if any VM fails to start,
// e.g. with ErrPluginStart for a bad plugin configuration.
func (h *Host) NewPool(ctx context.Context, n int) (*Pool, error) {
	p := &Pool{h: h, vms: make([]*VM, max(n, 1))}
	for i := range p.vms {
		vm, err := h.NewVM(ctx)
		if err != nil {
			p.Close()
			return nil, err
		}
		p.vms[i] = vm
	}
	return p, nil
}

// Pick returns the next worker's VM, replacing it first if it is broken.
func (p *Pool) Pick(ctx context.Context) (*VM, error) {
	i := int(p.next.Add(1) % uint64(len(p.vms)))
	p.mu.Lock()
	defer p.mu.Unlock()
	vm := p.vms[i]
	if vm != nil && vm.Err() == nil {
		return vm, nil
	}
	if vm != nil {
		vm.Close()
		p.replaced.Add(1)
	}
	vm, err := p.h.NewVM(ctx)
	if err != nil {
		p.vms[i] = nil
		return nil, fmt.Errorf("replace broken vm: %w", err)
	}
	p.vms[i] = vm
	return vm, nil
}

// VMs returns the current VMs (nil where a replacement failed).
func (p *Pool) VMs() []*VM {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*VM(nil), p.vms...)
}

// Replaced returns how many broken VMs were replaced.
func (p *Pool) Replaced() int64 { return p.replaced.Load() }

// Tick calls proxy_on_tick on every healthy VM (for ManualTicks hosts).
func (p *Pool) Tick() error {
	var errs []error
	for _, vm := range p.VMs() {
		if vm != nil && vm.Err() == nil {
			errs = append(errs, vm.Tick())
		}
	}
	return errors.Join(errs...)
}

// WaitHTTPCalls waits for the outstanding HTTP calls of every VM.
func (p *Pool) WaitHTTPCalls() {
	for _, vm := range p.VMs() {
		if vm != nil {
			vm.WaitHTTPCalls()
		}
	}
}

// Close closes every VM.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, vm := range p.vms {
		if vm != nil {
			vm.Close()
		}
	}
}
