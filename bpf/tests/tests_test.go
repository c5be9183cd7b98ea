package tests

import (
	"testing"

	"github.com/loctree/loctree/bpf"
	"github.com/loctree/loctree/internal/testing/kerneltest"
)

// TestLoad loads the test programs on the socket programs' maps through the
// kernel's verifier.
func TestLoad(t *testing.T) {
	kerneltest.RequireRoot(t)
	spec, err := bpf.Spec()
	if err != nil {
		t.Fatal(err)
	}
	var objs bpf.Objects
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		t.Fatalf("load: %+v", err)
	}
	defer objs.Close()
	tobjs, err := Load(&objs)
	if err != nil {
		t.Fatalf("%+v", err)
	}
	tobjs.Close()
}
