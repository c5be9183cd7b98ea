package kernel

import (
	"errors"
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/loctree/loctree/bpf"
	"github.com/loctree/loctree/internal/testing/kerneltest"
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

// TestAttachRefusesSecondAgent: a second agent (other pins, or none) on a
// cgroup that already runs an agent's programs is refused, naming the
// problem, and attaches nothing; the first keeps its hooks. Both with pins
// in the same directory is a restart: the links are re-adopted.
func TestAttachRefusesSecondAgent(t *testing.T) {
	kerneltest.RequireRoot(t)
	cg := kerneltest.Cgroup(t)
	loc := shared.Locality{"region": "r1"}
	first, err := Open(Config{Locality: loc, BPFFS: kerneltest.BPFFS(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if err := first.Attach(cg); err != nil {
		t.Fatal(err)
	}
	for _, bpffs := range []string{kerneltest.BPFFS(t), ""} {
		second, err := Open(Config{Locality: loc, BPFFS: bpffs})
		if err != nil {
			t.Fatal(err)
		}
		err = second.Attach(cg)
		second.Close()
		if !errors.Is(err, ErrOtherAgent) || !strings.Contains(err.Error(), "lt_sockops") { // the first hook
			t.Fatalf("second agent (bpffs %q) on the same cgroup: %v, want ErrOtherAgent naming lt_sockops", bpffs, err)
		}
	}
	for _, h := range hooks {
		if name, err := attachedProgram(cg, h); err != nil || name != h.name {
			t.Fatalf("hook %s after the refused agents: %q %v, want the first agent's program", h.name, name, err)
		}
	}
}
