package wasmproxy

import (
	"net/netip"
	"sync"

	"github.com/loctree/loctree/host"
	"github.com/loctree/loctree/shared"
)

// TreeKey is the shared-data key under which the loctree filter publishes
// its current encoded tree.
const TreeKey = "loctree/tree"

// TreeAllowlist allows exactly the endpoint addresses of the tree the
// filter published in the host's shared data (re-decoded when it changes).
type TreeAllowlist struct {
	Shared *host.SharedData
	mu     sync.Mutex
	gen    uint32 // CAS token of the decoded blob
	addrs  map[netip.AddrPort]bool
}

// Allowed reports whether ap is an endpoint of the current tree.
func (a *TreeAllowlist) Allowed(ap netip.AddrPort) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	cas, ok := a.Shared.CAS(TreeKey)
	if !ok {
		return false
	}
	if cas != a.gen || a.addrs == nil {
		blob, _, _ := a.Shared.Get(TreeKey)
		t, err := shared.Decode(blob)
		if err != nil {
			return false
		}
		a.addrs = map[netip.AddrPort]bool{}
		for i := range t.NumEndpoints() {
			a.addrs[t.Endpoint(uint32(i)).Addr] = true
		}
		a.gen = cas
	}
	return a.addrs[ap]
}
