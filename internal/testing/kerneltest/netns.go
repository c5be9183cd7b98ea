package kerneltest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// netnsEnv marks a test binary that already runs in its own network
// namespace.
const netnsEnv = "LOCTREE_TEST_NETNS"

// RunInOwnNetns runs the test binary again, with the same arguments, in a
// network namespace of its own with only its loopback interface up, and
// returns its exit code and true; the caller exits with that code. It
// returns false when the caller should run the tests itself: it is that
// child already, or it is not root (its kernel tests skip).
//
// Every address the kernel tests bind is then private to one test run:
// two runs on one host, or two packages of one run, never collide on a
// loopback address or port, and nothing the tests send can reach another
// network. Cgroups and bpffs are not namespaced; Cgroup and BPFFS give
// each test its own.
func RunInOwnNetns() (int, bool) {
	if os.Getenv(netnsEnv) != "" {
		if err := loopbackUp(); err != nil {
			fmt.Fprintf(os.Stderr, "kerneltest: bring up lo in the test's network namespace: %v\n", err)
			return 1, true
		}
		return 0, false
	}
	if os.Geteuid() != 0 {
		return 0, false
	}
	code, err := reexec()
	if err != nil {
		fmt.Fprintf(os.Stderr, "kerneltest: run the tests in their own network namespace: %v\n", err)
		return 1, true
	}
	return code, true
}

func reexec() (int, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(self, os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), netnsEnv+"=1")
	// Pdeathsig belongs to the thread that starts the child: keep it.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	// go test's -timeout sends SIGQUIT for a goroutine dump: pass it on,
	// with interrupts, to the child that runs the tests.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGQUIT, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		for s := range sigs {
			cmd.Process.Signal(s)
		}
	}()
	err = cmd.Wait()
	signal.Stop(sigs)
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if st, ok := exit.Sys().(syscall.WaitStatus); ok && st.Signaled() {
			return 128 + int(st.Signal()), nil
		}
		return exit.ExitCode(), nil
	}
	return 0, err
}

// loopbackUp sets lo up; the kernel gives it 127.0.0.1/8 and ::1.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// Main is TestMain for a package with kernel tests: it runs them in a
// network namespace of their own (RunInOwnNetns) and exits.
func Main(m interface{ Run() int }) {
	if code, ran := RunInOwnNetns(); ran {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// EnterNewNetns moves the calling OS thread into a new network namespace
// with its loopback up, as a pod's own netns. The caller has locked its
// goroutine to the thread (runtime.LockOSThread) and never unlocks it, so
// the thread ends with the goroutine instead of serving others in that
// namespace. Sockets the thread creates keep the test's cgroup.
func EnterNewNetns() error {
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("unshare netns: %w", err)
	}
	if err := loopbackUp(); err != nil {
		return fmt.Errorf("bring up lo: %w", err)
	}
	return nil
}
