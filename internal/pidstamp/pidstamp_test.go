package pidstamp

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		kind, name string
		pid        int
		ok         bool
	}{
		{"loctree-demo", "loctree-demo-123-456789", 123, true},
		{"loctree-demo", "loctree-demo-123", 123, true},
		{"loctree-demo-bpf", "loctree-demo-bpf-77-1", 77, true},
		{"loctree-demo", "loctree-demo-bpf-77-1", 0, false},
		{"loctree-demo", "loctree-demo-0123-1", 0, false},
		{"loctree-demo", "loctree-demo-0-1", 0, false},
		{"loctree-demo", "loctree-demo--1", 0, false},
		{"loctree-demo", "other-12-1", 0, false},
	} {
		if pid, ok := Parse(c.kind, c.name); pid != c.pid || ok != c.ok {
			t.Errorf("Parse(%q, %q) = %d, %v; want %d, %v", c.kind, c.name, pid, ok, c.pid, c.ok)
		}
	}
	if pid, ok := Parse("k", Prefix("k", 42)+"x"); pid != 42 || !ok {
		t.Errorf("Parse of Prefix: %d %v", pid, ok)
	}
}

func TestGone(t *testing.T) {
	if Gone(os.Getpid()) || Gone(0) || Gone(-1) {
		t.Fatal("this process, pid 0 or -1 reported gone")
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip(err)
	}
	if !Gone(cmd.Process.Pid) {
		if _, err := os.Stat("/proc/" + strconv.Itoa(cmd.Process.Pid)); err == nil {
			t.Skipf("pid %d already runs again", cmd.Process.Pid)
		}
		t.Fatalf("pid %d of a process that ended is not gone", cmd.Process.Pid)
	}
}
