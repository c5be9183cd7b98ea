package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/loctree/loctree/filter/shareddata"
	"github.com/loctree/loctree/host"
)

// TestSharedTreeRejectedKeepsLastGood: a VM releases its tree before it
// reads the next one from shared data (an update peaks at one tree), so a
// shared tree it rejects (published by a VM of another build under the same
// vm_id) leaves it to restore the last good one from
// shareddata.PreviousTree, where the publisher keeps it. It does not read
// the rejected version again; the next good tree is installed.
func TestSharedTreeRejectedKeepsLastGood(t *testing.T) {
	cfg := `{"tree":{"cluster":"agent","refresh_ms":1000},"locality":{"region":"us-east","zone":"us-east-1b","subzone":"rack-1"}}`
	h := newHost(t, cfg, host.Options{ManualTicks: true})
	good := buildTree(t, topo, 1)
	publishShared(h, good)
	vm := workerVM(t, h)
	tick := func(want string) {
		t.Helper()
		if err := vm.Tick(); err != nil {
			t.Fatal(err)
		}
		if got := pickOn(t, vm, "reviews"); got != want {
			t.Fatalf("picked %q, want %q", got, want)
		}
	}
	tick("127.0.2.3:9080")

	next := buildTree(t, strings.Replace(topo, "127.0.2.3:9080", "127.0.2.33:9080", 1), 2)
	bad := bytes.Clone(next.Bytes())
	bad[len(bad)-1] ^= 0xff
	h.Shared().Set(shareddata.PreviousTree, good.Bytes(), 0)
	publishShared(h, next)
	h.Shared().Set(shareddata.Tree, bad, 0)
	tick("127.0.2.3:9080")
	tick("127.0.2.3:9080")
	if n := countLogs(h, "shared tree rejected"); n != 1 {
		t.Fatalf("%d rejections logged, want 1 (the rejected version is not read again): %v", n, h.Logs())
	}
	if g, _ := h.Metrics().Value("loctree_tree_generation"); g != 1 {
		t.Fatalf("generation gauge %d, want the restored 1", g)
	}

	publishShared(h, buildTree(t, strings.Replace(topo, "127.0.2.3:9080", "127.0.2.34:9080", 1), 3))
	tick("127.0.2.34:9080")
}
