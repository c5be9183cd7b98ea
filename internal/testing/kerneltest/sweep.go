package kerneltest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/loctree/loctree/internal/pidstamp"
)

// A test binary that is killed (a timeout, ^C) runs no Cleanup: its bpffs
// and cgroup2 mounts stay, and the links pinned in the bpffs keep its
// programs attached to its child cgroup. Mounts and child cgroups carry the
// pid of the process that made them, so the next test process removes
// those whose process is gone. A pid that runs again (reused) is left
// alone: a leak, never a removal from under a live test.
var sweepOnce sync.Once

// mountPrefix is the prefix of the temporary directory of a mount of
// fstype made by process pid.
func mountPrefix(fstype string, pid int) string {
	return pidstamp.Prefix("loctree-"+fstype, pid)
}

// sweep removes what killed test processes left: their bpffs mounts first
// (unmounting a bpffs drops its pins, so their links detach), then their
// child cgroups, then their cgroup2 mounts.
func sweep() {
	sweepOnce.Do(func() {
		for _, fstype := range []string{"bpf", "cgroup2"} {
			for _, dir := range deadMounts(fstype) {
				if fstype == "cgroup2" {
					sweepCgroups(dir)
				}
				if syscall.Unmount(dir, syscall.MNT_DETACH) == nil {
					os.Remove(dir)
				}
			}
		}
	})
}

// deadMounts are the mount directories of fstype whose process is gone.
func deadMounts(fstype string) []string {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "loctree-"+fstype+"-*-*"))
	var out []string
	for _, dir := range dirs {
		rest := strings.TrimPrefix(filepath.Base(dir), "loctree-"+fstype+"-")
		pid, _, _ := strings.Cut(rest, "-")
		if gone(pid) {
			out = append(out, dir)
		}
	}
	return out
}

// sweepCgroups removes the child cgroups of killed test processes under a
// cgroup2 mount (one hierarchy: any mount shows them all).
func sweepCgroups(root string) {
	dirs, _ := filepath.Glob(filepath.Join(root, "loctree-test-*"))
	for _, dir := range dirs {
		if gone(strings.TrimPrefix(filepath.Base(dir), "loctree-test-")) {
			os.Remove(dir) // fails, harmlessly, while a process is still in it
		}
	}
}

// gone reports whether pid is a number no process has, or a zombie's
// (pidstamp.Gone).
func gone(pid string) bool {
	n, err := strconv.Atoi(pid)
	return err == nil && pidstamp.Gone(n)
}
