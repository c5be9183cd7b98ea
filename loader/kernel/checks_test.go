package kernel

import (
	"strings"
	"testing"
)

// TestFilesystemNames: a --cgroup or --bpffs on the wrong filesystem is
// told by its name, not its magic number.
func TestFilesystemNames(t *testing.T) {
	for magic, want := range map[int64]string{0xef53: "ext4", 0x58465342: "xfs", 0x9123683e: "btrfs", 0x794c7630: "overlayfs", 0x9fa0: "proc", 0x1234: "type 0x1234"} {
		if got := fsName(magic); got != want {
			t.Errorf("fsName(%#x) = %q, want %q", magic, got, want)
		}
	}
	if err := CheckCgroup("/proc"); err == nil || !strings.Contains(err.Error(), "its filesystem is proc") {
		t.Errorf("CheckCgroup(/proc) = %v, want it to name proc", err)
	}
	if err := CheckBPFFS("/proc/nonexistent/x"); err == nil || !strings.Contains(err.Error(), "/proc is not on a bpffs mount (its filesystem is proc)") {
		t.Errorf("CheckBPFFS below /proc = %v, want it to name /proc and proc", err)
	}
}

// TestNeedCapabilities: what each operation needs.
func TestNeedCapabilities(t *testing.T) {
	for need, want := range map[Need]string{Load | Attach: "CAP_BPF, CAP_PERFMON, CAP_NET_ADMIN", Pins: "CAP_BPF", Pins | Attach: "CAP_BPF, CAP_NET_ADMIN"} {
		if got := capNames(need.capabilities()); got != want {
			t.Errorf("%b: %s, want %s", need, got, want)
		}
	}
}
