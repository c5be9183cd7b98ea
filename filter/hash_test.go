package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/loctree/loctree/host"
	"github.com/loctree/loctree/shared"
)

const hashTopology = `{"services":[{"name":"sticky","policy":"consistent_hash","endpoints":[` +
	`{"address":"127.0.7.1:80","locality":{"region":"r"}},{"address":"127.0.7.2:80","locality":{"region":"r"}},` +
	`{"address":"127.0.7.3:80","locality":{"region":"r"},"weight":3},{"address":"127.0.7.4:80","locality":{"region":"r"}},` +
	`{"address":"127.0.7.5:80","locality":{"region":"r"}},{"address":"[::1]:80","locality":{"region":"r"},"weight":2}]}]}`

// hashPickOn sends a request with the consistent-hash key to vm.
func hashPickOn(t *testing.T, vm *host.VM, key string) string {
	t.Helper()
	res, err := vm.Do(context.Background(), &host.Request{Headers: host.Headers(req("sticky", [2]string{hashKeyHeader, key}))}, nil)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := res.Request.Headers.Get(defaultHeader)
	return v
}

// TestConsistentHashStableAcrossVMs: the same key lands on the same
// endpoint on every worker VM, after a VM restart, and where shared's
// Picker (what `loctree tree pick --key` runs) sends it. Envoy runs one VM
// per worker thread, so a per-VM seed would split one key over workers.
func TestConsistentHashStableAcrossVMs(t *testing.T) {
	cfg := `{"topology":` + hashTopology + `,"locality":{"region":"r"}}`
	h := newHost(t, cfg, host.Options{})
	pool, err := h.NewPool(context.Background(), 2)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	tree := buildTree(t, hashTopology, 1)
	svc, _ := tree.Service("sticky")
	picker := shared.NewPicker(tree, shared.PickerOptions{Seed: 1})
	restarted := func() *host.VM { // a fresh VM, as after an Envoy restart
		vm, err := h.NewVM(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { vm.Close() })
		return vm
	}()
	vms := append(pool.VMs(), restarted)
	for k := range 40 {
		key := fmt.Sprint("user-", k)
		ep, _ := picker.Pick(svc, svc.Lookup(shared.Locality{"region": "r"}), shared.HashKey(key))
		want := tree.Endpoint(ep).Addr.String()
		for i, vm := range vms {
			if got := hashPickOn(t, vm, key); strings.Split(got, ",")[0] != want {
				t.Fatalf("key %q on vm %d: %q, shared's Picker: %q", key, i, got, want)
			}
		}
	}
}
