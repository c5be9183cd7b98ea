package kernel

import (
	"testing"

	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/shared"
)

// TestLoadAwareServedInKernel: a service with load_aware is installed by
// Apply and ApplyServices like any other, with its band and its widening
// records; one that gains or drops load_aware is rewritten (its digest
// holds the band), never refused.
func TestLoadAwareServedInKernel(t *testing.T) {
	kerneltest.RequireRoot(t)
	in, err := Open(Config{Locality: benchLocality, Capacity: Capacity{Services: 8, Nodes: 1024, Endpoints: 64}})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	la := bigService("la", "127.77.9.1:80", 10, 9500)
	la.LoadAware = &shared.LoadAwareSpec{}
	plain := bigService("plain", "127.77.9.2:80", 10, 9500)
	var b shared.Builder
	tree, err := b.Update([]shared.ServiceSpec{la, plain}, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	res, err := in.ApplyServices(tree, nil) // the first: a full Apply
	if err != nil || res.Refused != nil || res.Services != 2 {
		t.Fatalf("Apply: %+v, %v; want both services installed, none refused", res, err)
	}
	band(t, in, "la", shared.DefaultLoadHigh, shared.DefaultLoadLow)
	band(t, in, "plain", 0, 0)

	la.LoadAware = nil
	plain.LoadAware = &shared.LoadAwareSpec{}
	tree, err = b.Update([]shared.ServiceSpec{la, plain}, nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	if res, err = in.ApplyServices(tree, []string{"la", "plain"}); err != nil || res.Refused != nil || res.Rewritten != 2 {
		t.Fatalf("ApplyServices: %+v, %v; want both rewritten, none refused", res, err)
	}
	band(t, in, "la", 0, 0)
	band(t, in, "plain", shared.DefaultLoadHigh, shared.DefaultLoadLow)
}

// band checks the installed band of service name and that a load-aware
// one has its widening records: one per node, then the leaves.
func band(t *testing.T, in *Installer, name string, high, low uint32) {
	t.Helper()
	v := in.installed[in.byName[name]]
	if uint32(v.LoadHigh) != high || uint32(v.LoadLow) != low {
		t.Fatalf("%s installed with band %d/%d, want %d/%d", name, v.LoadHigh, v.LoadLow, high, low)
	}
	if high == 0 {
		return
	}
	keys, err := in.widenKeys(v)
	if err != nil || len(keys) == 0 || v.WidenLeaves <= v.Widen || v.WidenLeaves >= v.NodeBase+v.NodeLen {
		t.Fatalf("%s: widening records at %d, leaves at %d in region [%d, +%d): %d keys, %v", name, v.Widen, v.WidenLeaves, v.NodeBase, v.NodeLen, len(keys), err)
	}
}
