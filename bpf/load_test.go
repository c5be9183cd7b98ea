package bpf

import (
	"maps"
	"slices"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/loctree/loctree/internal/testing/kerneltest"
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

// maxVerifiedInsns bounds the instructions the verifier walks for one
// program: the walk is most of a program's load time, and the agent loads
// the programs within its health window. The socket programs took about
// 98,000 each (after the priority load was split into global functions,
// from 358,000); the bound leaves room for growth, not for another blow-up.
const maxVerifiedInsns = 150_000

// TestVerifiedInstructions loads every program and logs the instructions
// the verifier walked for it (`go test -v -run TestVerifiedInstructions
// ./bpf/`, the kernel's verified_insns as bpftool prog show reports it); it
// fails when one exceeds maxVerifiedInsns.
func TestVerifiedInstructions(t *testing.T) {
	requireRoot(t)
	spec, err := Spec()
	if err != nil {
		t.Fatal(err)
	}
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		t.Fatalf("load: %+v", err)
	}
	defer coll.Close()
	total := uint32(0)
	for _, name := range slices.Sorted(maps.Keys(coll.Programs)) {
		info, err := coll.Programs[name].Info()
		if err != nil {
			t.Fatal(err)
		}
		n, ok := info.VerifiedInstructions()
		if !ok {
			t.Skip("the kernel does not report verified instructions")
		}
		total += n
		t.Logf("%-16s verified_insns %7d", name, n)
		if n > maxVerifiedInsns {
			t.Errorf("%s: the verifier walked %d instructions, more than %d: program load time grows with them", name, n, maxVerifiedInsns)
		}
	}
	t.Logf("%-16s verified_insns %7d", "total", total)
}
