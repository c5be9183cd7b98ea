package kerneltest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestSweepRemovesWhatKilledTestsLeft: mounts and a child cgroup named for
// a process that is gone, or a zombie not reaped yet (as a killed test
// binary leaves them), are removed by the next test process; those of a
// live process stay.
func TestSweepRemovesWhatKilledTestsLeft(t *testing.T) {
	RequireRoot(t)
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := cmd.Process.Pid
	if !gone(strconv.Itoa(dead)) {
		t.Skipf("pid %d already runs again", dead)
	}
	leftover := func(fstype string, pid int) string {
		dir, err := os.MkdirTemp("", mountPrefix(fstype, pid))
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mount(fstype, dir, fstype, 0, ""); err != nil {
			t.Fatalf("mount %s: %v", fstype, err)
		}
		t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH); os.Remove(dir) })
		return dir
	}
	zombie := exec.Command("true")
	if err := zombie.Start(); err != nil {
		t.Fatal(err)
	}
	defer zombie.Wait()
	for deadline := time.Now().Add(5 * time.Second); !gone(strconv.Itoa(zombie.Process.Pid)); {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d never became a zombie", zombie.Process.Pid)
		}
		time.Sleep(time.Millisecond)
	}
	undead := zombie.Process.Pid
	deadBPF, deadCG := leftover("bpf", dead), leftover("cgroup2", undead)
	child := filepath.Join(deadCG, "loctree-test-"+strconv.Itoa(undead))
	if err := os.Mkdir(child, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(child) })
	live := leftover("bpf", os.Getpid())

	sweepOnce = sync.Once{}
	sweep()
	for _, dir := range []string{deadBPF, deadCG} {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s (its process gone or a zombie) is still there: %v", dir, err)
		}
	}
	if !mounted(t, live) {
		t.Errorf("%s (this process's) was unmounted", live)
	}
	probe := leftover("cgroup2", os.Getpid())
	if _, err := os.Stat(filepath.Join(probe, filepath.Base(child))); !os.IsNotExist(err) {
		t.Errorf("cgroup %s of zombie %d is still there: %v", filepath.Base(child), undead, err)
	}
}

// mounted reports whether dir is a mount point (its device differs from
// its parent's).
func mounted(t *testing.T, dir string) bool {
	var st, parent syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Stat(filepath.Dir(dir), &parent); err != nil {
		t.Fatal(err)
	}
	return st.Dev != parent.Dev
}
