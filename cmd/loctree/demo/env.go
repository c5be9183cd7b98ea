package demo

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/loctree/loctree/internal/pidstamp"
)

// env is what the demo set up on the machine: a private cgroup2 mount with
// a child cgroup of its own (the agent attaches there, never to the root of
// the hierarchy) and one cgroup per source below it, and a private bpffs
// mount. close undoes all of it, in reverse order. Every name carries the
// pid, so the next demo can remove what a killed one left (sweep.go).
type env struct {
	cgroupMount string
	attach      string            // the child cgroup the programs attach to
	sourceCg    map[string]string // source name → its cgroup below attach
	home        string            // the process's own cgroup, to go back to
	bpffsMount  string
	swept       []int // pids of killed demos whose leftovers setUp removed
	sweepErr    error // what it could not remove
	undo        []func() error
	mu          sync.Mutex // one cgroup move at a time
}

// setUp mounts cgroup2 and bpffs in temporary directories and creates the
// cgroups. On error, what was done is undone.
func setUp() (e *env, err error) {
	e = &env{sourceCg: map[string]string{}}
	defer func() {
		if err != nil {
			e.close()
		}
	}()
	if e.cgroupMount, err = e.mount("cgroup2", stampCgroup); err != nil {
		return nil, err
	}
	e.swept, e.sweepErr = sweep(e.cgroupMount)
	if e.home, err = ownCgroup(e.cgroupMount); err != nil {
		return nil, err
	}
	e.attach = filepath.Join(e.cgroupMount, fmt.Sprintf("%s-%d", stampDir, os.Getpid()))
	if err = e.mkdir(e.attach); err != nil {
		return nil, err
	}
	for _, s := range sources {
		dir := filepath.Join(e.attach, s.Name)
		if err = e.mkdir(dir); err != nil {
			return nil, err
		}
		e.sourceCg[s.Name] = dir
	}
	if e.bpffsMount, err = e.mount("bpf", stampBPFFS); err != nil {
		return nil, err
	}
	return e, nil
}

// mount mounts a filesystem of fstype on a new temporary directory named
// kind and the pid.
func (e *env) mount(fstype, kind string) (string, error) {
	dir, err := os.MkdirTemp("", pidstamp.Prefix(kind, os.Getpid()))
	if err != nil {
		return "", err
	}
	if err := syscall.Mount(fstype, dir, fstype, 0, ""); err != nil {
		os.Remove(dir)
		return "", fmt.Errorf("mount %s on %s: %w (the demo needs root and a kernel with %s)", fstype, dir, err, fstype)
	}
	e.undo = append(e.undo, func() error {
		err := syscall.Unmount(dir, syscall.MNT_DETACH)
		os.Remove(dir)
		if err != nil {
			return fmt.Errorf("unmount %s: %w", dir, err)
		}
		return nil
	})
	return dir, nil
}

func (e *env) mkdir(dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("create cgroup: %w", err)
	}
	e.undo = append(e.undo, func() error {
		if err := os.Remove(dir); err != nil {
			return fmt.Errorf("remove cgroup %s: %w", dir, err)
		}
		return nil
	})
	return nil
}

// close undoes setUp (and anything pushed on undo since) in reverse order.
func (e *env) close() error {
	var errs []error
	for i := len(e.undo) - 1; i >= 0; i-- {
		errs = append(errs, e.undo[i]())
	}
	e.undo = nil
	return errors.Join(errs...)
}

// ownCgroup is the process's cgroup v2 directory under mount.
func ownCgroup(mount string) (string, error) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return filepath.Join(mount, p), nil
		}
	}
	return mount, nil
}

// inCgroup runs f with the whole process moved into dir, then moves it
// back home. Sockets keep the cgroup of the process that created them, so a
// connection dialled in f is one of dir's workloads for the kernel path.
func (e *env) inCgroup(dir string, f func()) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	pid := []byte(strconv.Itoa(os.Getpid()))
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), pid, 0); err != nil {
		return fmt.Errorf("move into %s: %w", dir, err)
	}
	f()
	if err := os.WriteFile(filepath.Join(e.home, "cgroup.procs"), pid, 0); err != nil {
		return fmt.Errorf("move back to %s: %w", e.home, err)
	}
	return nil
}
