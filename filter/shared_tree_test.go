package main

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/loctree/loctree/filter/shareddata"
	"github.com/loctree/loctree/host"
	"github.com/loctree/loctree/shared"
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

// TestSharedTreeOfAnotherFormatKeepsOwn: while two builds of the filter
// that read different tree formats share a vm_id (an upgrade in progress),
// the newer one publishes trees the older cannot read, under both shared
// keys. The older VM sees the format in the small generation key and keeps
// its own tree, without releasing it for a tree it would reject. Before the
// format was part of that key, it released its tree, rejected both shared
// ones and passed requests through.
func TestSharedTreeOfAnotherFormatKeepsOwn(t *testing.T) {
	cfg := `{"tree":{"cluster":"agent","refresh_ms":1000},"locality":{"region":"us-east","zone":"us-east-1b","subzone":"rack-1"}}`
	h := newHost(t, cfg, host.Options{ManualTicks: true})
	publishShared(h, buildTree(t, topo, 1))
	vm := workerVM(t, h)
	if err := vm.Tick(); err != nil {
		t.Fatal(err)
	}
	for gen := uint64(2); gen <= 3; gen++ { // the newer build publishes twice
		other := bytes.Clone(buildTree(t, strings.Replace(topo, "127.0.2.3:9080", "127.0.2.33:9080", 1), gen).Bytes())
		binary.LittleEndian.PutUint16(other[4:], shared.FormatVersion+1)
		prev, _, _ := h.Shared().Get(shareddata.Tree)
		h.Shared().Set(shareddata.PreviousTree, prev, 0)
		ver := blobVersion(other)
		h.Shared().Set(shareddata.Tree, other, 0)
		h.Shared().Set(shareddata.Generation, ver[:], 0)
		if err := vm.Tick(); err != nil {
			t.Fatal(err)
		}
		if got := pickOn(t, vm, "reviews"); got != "127.0.2.3:9080" {
			t.Fatalf("after the other build's generation %d: picked %q, want the VM's own tree's 127.0.2.3:9080", gen, got)
		}
	}
}
