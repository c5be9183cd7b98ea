package proxy

import (
	"net/netip"
	"sync"

	"github.com/loctree/loctree/filter/shareddata"
	"github.com/loctree/loctree/host"
	"github.com/loctree/loctree/shared"
)

// recentTrees is how many trees TreeAllowlist allows at once: the one in
// shared data and the ones it saw there before. A worker picks up the
// shared tree on its own tick and a new tree is published at most once per
// tick of the worker that fetches, so a worker lags a tree or two behind;
// Proxy brings a worker that lags further up to date (see Proxy.run).
const recentTrees = 4

// TreeAllowlist allows the endpoint addresses of the tree the filter
// published in the host's shared data, and of the trees it saw published
// before that one, which a worker VM may still hold until its next tick.
type TreeAllowlist struct {
	Shared *host.SharedData
	mu     sync.Mutex
	gen    uint32                    // CAS token of the newest decoded blob
	trees  []map[netip.AddrPort]bool // endpoint addresses, oldest first
}

// Allowed reports whether ap is an endpoint of the current tree or of one
// of the trees published just before it.
func (a *TreeAllowlist) Allowed(ap netip.AddrPort) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	cas, ok := a.Shared.CAS(shareddata.Tree)
	if !ok {
		return false
	}
	if cas != a.gen || len(a.trees) == 0 {
		a.observe(cas)
	}
	for _, addrs := range a.trees {
		if addrs[ap] {
			return true
		}
	}
	return false
}

// observe decodes the shared tree and adds its endpoints to the recent
// trees, dropping the oldest past recentTrees. A blob that does not decode
// is not added: the filter rejects it and keeps its last good tree.
func (a *TreeAllowlist) observe(cas uint32) {
	a.gen = cas
	blob, _, _ := a.Shared.Get(shareddata.Tree)
	t, err := shared.Decode(blob)
	if err != nil {
		return
	}
	addrs := make(map[netip.AddrPort]bool, t.NumEndpoints())
	for i := range t.NumEndpoints() {
		addrs[t.Endpoint(uint32(i)).Addr] = true
	}
	a.trees = append(a.trees, addrs)
	if n := len(a.trees); n > recentTrees {
		a.trees = append(a.trees[:0], a.trees[n-recentTrees:]...)
	}
}
