package bpf

import (
	"testing"

	"github.com/loctree/loctree/internal/kerneltest"
)

// requireRoot skips when the test cannot load BPF programs; CI runs as root
// and sets kerneltest.RequireEnv, which turns the skip into a failure.
func requireRoot(t *testing.T) {
	t.Helper()
	kerneltest.RequireRoot(t)
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
}
