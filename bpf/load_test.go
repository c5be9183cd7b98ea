package bpf

import (
	"os"
	"testing"

	"github.com/cilium/ebpf"
)

// requireRoot skips when the test cannot load BPF programs; CI runs as root.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to load BPF programs")
	}
}

// TestLoad loads every program through the kernel's verifier.
func TestLoad(t *testing.T) {
	requireRoot(t)
	var objs Objects
	spec, err := Spec()
	if err != nil {
		t.Fatal(err)
	}
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		t.Fatalf("load: %+v", err)
	}
	defer objs.Close()

	tspec, err := TestSpec()
	if err != nil {
		t.Fatal(err)
	}
	var tobjs TestObjects
	opts := &ebpf.CollectionOptions{MapReplacements: map[string]*ebpf.Map{
		MapFrontends: objs.LtFrontends, MapNodes: objs.LtNodes, MapEndpoints: objs.LtEndpoints,
		MapConns: objs.LtConns, MapRR: objs.LtRr, MapStats: objs.LtStats, MapCgroupSrc: objs.LtCgroupSrc, MapCgroupLevels: objs.LtCgroupLevels,
	}}
	if err := tspec.LoadAndAssign(&tobjs, opts); err != nil {
		t.Fatalf("load test program: %+v", err)
	}
	defer tobjs.Close()
}
