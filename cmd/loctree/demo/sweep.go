package demo

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/loctree/loctree/internal/pidstamp"
	"github.com/loctree/loctree/loader/kernel"
)

// A demo killed with SIGKILL runs none of its clean-up: its cgroup2 and
// bpffs mounts, its cgroup with the agent's programs attached, the pins
// that keep them attached, and its topology directory stay. All of them
// carry the demo's pid (stamp), so the next demo removes those of a demo
// whose process is gone, as the test kit does for killed test runs
// (internal/testing/kerneltest/sweep.go); a pid that runs again is left alone.

// Names of what a demo makes, stamped with its pid (pidstamp.Prefix).
const (
	stampDir    = "loctree-demo"         // topology directory; the attach cgroup is exactly "loctree-demo-<pid>"
	stampBPFFS  = "loctree-demo-bpf"     // bpffs mount
	stampCgroup = "loctree-demo-cgroup2" // cgroup2 mount
)

// sweep removes what dead demos left; cgroupRoot is a cgroup2 mount (any
// mount shows the whole hierarchy). It returns the pids it swept.
func sweep(cgroupRoot string) ([]int, error) {
	var pids []int
	var errs []error
	for _, pid := range deadDemos(cgroupRoot) {
		pids = append(pids, pid)
		if err := sweepDemo(cgroupRoot, pid); err != nil {
			errs = append(errs, fmt.Errorf("demo %d: %w", pid, err))
		}
	}
	return pids, errors.Join(errs...)
}

// deadDemos are the pids stamped on demo mounts, directories and cgroups
// whose process is gone.
func deadDemos(cgroupRoot string) []int {
	var pids []int
	add := func(dir string, kinds ...string) {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			for _, kind := range kinds {
				if pid, ok := pidstamp.Parse(kind, e.Name()); ok && !slices.Contains(pids, pid) && pidstamp.Gone(pid) {
					pids = append(pids, pid)
				}
			}
		}
	}
	add(os.TempDir(), stampDir, stampBPFFS, stampCgroup)
	add(cgroupRoot, stampDir)
	return pids
}

// sweepDemo removes what demo pid left, in the order its own clean-up
// would: the programs and pins (kernel.Uninstall), the bpffs mount, the
// cgroups, the cgroup2 mount, the topology directory.
func sweepDemo(cgroupRoot string, pid int) error {
	attach := filepath.Join(cgroupRoot, fmt.Sprintf("%s-%d", stampDir, pid))
	if _, err := os.Stat(attach); err != nil {
		attach = ""
	}
	var errs []error
	for _, m := range stamped(stampBPFFS, pid) {
		errs = append(errs, kernel.Uninstall(attach, filepath.Join(m, "loctree")), unmount(m))
	}
	if attach != "" {
		errs = append(errs, removeCgroup(attach))
	}
	for _, m := range stamped(stampCgroup, pid) {
		errs = append(errs, unmount(m))
	}
	for _, d := range stamped(stampDir, pid) {
		errs = append(errs, os.RemoveAll(d))
	}
	return errors.Join(errs...)
}

// stamped are the entries of the temporary directory made with
// pidstamp.Prefix(kind, pid).
func stamped(kind string, pid int) []string {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), pidstamp.Prefix(kind, pid)+"*"))
	return dirs
}

// unmount detaches the mount on dir (if it is one) and removes dir.
func unmount(dir string) error {
	if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// removeCgroup removes the cgroup dir and the cgroups below it (the
// demo's sources), children first.
func removeCgroup(dir string) error {
	entries, _ := os.ReadDir(dir)
	var errs []error
	for _, e := range entries {
		if e.IsDir() {
			errs = append(errs, removeCgroup(filepath.Join(dir, e.Name())))
		}
	}
	if err := os.Remove(dir); err != nil {
		errs = append(errs, fmt.Errorf("remove cgroup: %w", err))
	}
	return errors.Join(errs...)
}
