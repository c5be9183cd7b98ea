// Package kerneltest sets up what the kernel-path tests need: root, a
// private cgroup v2 mount with a child cgroup holding the test process, a
// private bpffs mount, and backends on 127.0.0.0/8 that answer with their
// own address. Everything is removed when the test ends, and what a killed
// test process left is removed by the next one (sweep.go).
package kerneltest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// RequireEnv names the environment variable that turns the skips of this
// package into failures: CI sets it, so a missing kernel feature cannot
// hide behind a skip.
const RequireEnv = "LOCTREE_REQUIRE_KERNEL"

// skip skips the test with reason, or fails it when RequireEnv is set.
func skip(tb testing.TB, format string, args ...any) {
	tb.Helper()
	if os.Getenv(RequireEnv) != "" {
		tb.Fatalf("%s is set, so this test must not skip: "+format, append([]any{RequireEnv}, args...)...)
	}
	tb.Skipf(format, args...)
}

// RequireRoot skips a test that needs root; CI runs as root and does not skip.
func RequireRoot(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		skip(tb, "needs root: loads BPF programs and mounts cgroup2/bpffs")
	}
}

var cgroupMu sync.Mutex

// Cgroup mounts cgroup2 in a temporary directory, creates a child cgroup and
// moves the test process into it, so programs attached to the child see
// this process's sockets and nobody else's. It returns the child's path.
func Cgroup(tb testing.TB) string {
	tb.Helper()
	RequireRoot(tb)
	cgroupMu.Lock()
	root := mount(tb, "cgroup2", "cgroup2")
	sweepCgroups(root)
	child := filepath.Join(root, fmt.Sprintf("loctree-test-%d", os.Getpid()))
	if err := os.Mkdir(child, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		tb.Fatalf("create cgroup: %v", err)
	}
	home := filepath.Join(root, ownCgroup(tb))
	pid := []byte(strconv.Itoa(os.Getpid()))
	if err := os.WriteFile(filepath.Join(child, "cgroup.procs"), pid, 0); err != nil {
		tb.Fatalf("move test process into %s: %v", child, err)
	}
	tb.Cleanup(func() {
		defer cgroupMu.Unlock()
		if err := os.WriteFile(filepath.Join(home, "cgroup.procs"), pid, 0); err != nil {
			tb.Errorf("move test process back to %s: %v", home, err)
		}
		if err := os.Remove(child); err != nil {
			tb.Errorf("remove cgroup: %v", err)
		}
	})
	return child
}

// ownCgroup is the process's cgroup v2 path ("0::/path" in /proc/self/cgroup).
func ownCgroup(tb testing.TB) string {
	tb.Helper()
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		tb.Fatal(err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p
		}
	}
	return "/"
}

// BPFFS mounts a private bpffs in a temporary directory.
func BPFFS(tb testing.TB) string {
	tb.Helper()
	RequireRoot(tb)
	return mount(tb, "bpf", "bpf")
}

func mount(tb testing.TB, fstype, source string) string {
	tb.Helper()
	sweep()
	dir, err := os.MkdirTemp("", mountPrefix(fstype, os.Getpid()))
	if err != nil {
		tb.Fatal(err)
	}
	if err := syscall.Mount(source, dir, fstype, 0, ""); err != nil {
		os.Remove(dir)
		skip(tb, "cannot mount %s (kernel or container lacks it): %v", fstype, err)
	}
	tb.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			tb.Errorf("unmount %s: %v", dir, err)
		}
		os.Remove(dir)
	})
	return dir
}

// Backends listen on each address (TCP and UDP, 127.0.0.0/8 only) and
// answer every connection or datagram with their own address.
func Backends(tb testing.TB, addrs []string) {
	tb.Helper()
	for _, a := range addrs {
		ap := mustLoopback(tb, a)
		ln, err := net.Listen("tcp", ap)
		if err != nil {
			tb.Fatalf("backend %s: %v", ap, err)
		}
		pc, err := net.ListenPacket("udp", ap)
		if err != nil {
			tb.Fatalf("backend %s: %v", ap, err)
		}
		tb.Cleanup(func() { ln.Close(); pc.Close() })
		go serveTCP(ln, ap)
		go serveUDP(pc, ap)
	}
}

func mustLoopback(tb testing.TB, a string) string {
	tb.Helper()
	ap, err := net.ResolveTCPAddr("tcp", a)
	if err != nil || !ap.IP.IsLoopback() {
		tb.Fatalf("backend %q is not a loopback address", a)
	}
	return ap.String()
}

func serveTCP(ln net.Listener, self string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		c.Write([]byte(self))
		c.Close()
	}
}

func serveUDP(pc net.PacketConn, self string) {
	buf := make([]byte, 64)
	for {
		_, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		pc.WriteTo([]byte(self), from)
	}
}

// Ask connects over TCP to addr and returns what the backend said.
func Ask(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	b, err := io.ReadAll(c)
	return string(b), err
}

// MoveTo moves the test process into the cgroup v2 directory dir (for
// example filepath.Dir of Cgroup's result, the root). Sockets take the
// cgroup of the process that creates them.
func MoveTo(tb testing.TB, dir string) {
	tb.Helper()
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
		tb.Fatalf("move test process into %s: %v", dir, err)
	}
}

// FreeAddr returns a TCP address on 127.0.0.1 that was free a moment ago,
// for a server the test starts in another process.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Eventually polls f every 20 ms until it returns nil, failing the test with
// f's last error after within.
func Eventually(tb testing.TB, within time.Duration, what string, f func() error) {
	tb.Helper()
	var err error
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if err = f(); err == nil {
			return
		}
	}
	tb.Fatalf("%s: %v", what, err)
}
