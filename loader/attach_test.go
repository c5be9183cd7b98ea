package loader

import (
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/loctree/loctree/bpf"
	"github.com/loctree/loctree/internal/kerneltest"
	"github.com/loctree/loctree/shared"
)

// TestAttachAllOrNothing: when one hook cannot be attached, Attach names
// it and detaches the hooks it had attached before, pinned or not: no
// half-attached data path is left behind.
func TestAttachAllOrNothing(t *testing.T) {
	kerneltest.RequireRoot(t)
	saved := hooks
	t.Cleanup(func() { hooks = saved })
	// A connect4 program cannot attach as connect6: the fourth hook fails.
	broken := hook{"lt_broken", ebpf.AttachCGroupInet6Connect, func(p *bpf.Objects) *ebpf.Program { return p.LtConnect4 }}
	hooks = append(append(append([]hook{}, saved[:3]...), broken), saved[3:]...)
	for _, pinned := range []bool{false, true} {
		t.Run(map[bool]string{false: "unpinned", true: "pinned"}[pinned], func(t *testing.T) { attachFails(t, pinned) })
	}
}

func attachFails(t *testing.T, pinned bool) {
	cg := kerneltest.Cgroup(t)
	cfg := Config{Locality: shared.Locality{"region": "r1"}}
	if pinned {
		cfg.BPFFS = kerneltest.BPFFS(t)
	}
	in, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	err = in.Attach(cg)
	if err == nil || !strings.Contains(err.Error(), "lt_broken") {
		t.Fatalf("Attach = %v, want an error naming lt_broken", err)
	}
	if err := checkDetached(cg); err != nil {
		t.Fatalf("after the failed Attach: %v", err)
	}
}
