package shared

import (
	"testing"

	"github.com/loctree/loctree/shared/wire"
)

// TestEncodedSize holds the format to its budget: 32 bytes per endpoint and at
// most 40 bytes per node (record + value string), beyond the header and the
// per-service record and names.
func TestEncodedSize(t *testing.T) {
	for _, n := range []int{100, 10000} {
		top, _ := meshTopology(n)
		tree, err := Build(top, BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s := tree.Services()[0]
		fixed := wire.HeaderSize + wire.ServiceRecordSize + 2 + len(s.name) + 1 + len(s.hosts)
		for _, sc := range s.scopes {
			fixed += 2 + len(sc)
		}
		budget := fixed + wire.EndpointRecordSize*tree.NumEndpoints() + 40*tree.NumNodes()
		if got := len(tree.Bytes()); got > budget {
			t.Errorf("N=%d: %d bytes for %d endpoints and %d nodes, budget %d", n, got, tree.NumEndpoints(), tree.NumNodes(), budget)
		}
		perNode := float64(len(tree.Bytes())-fixed-wire.EndpointRecordSize*tree.NumEndpoints()) / float64(tree.NumNodes())
		t.Logf("N=%d: %d bytes, %.1f bytes per node beyond 32 per endpoint", n, len(tree.Bytes()), perNode)
	}
}
