package kernel

import (
	"errors"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The kernel tests call connect, read and sendto on raw blocking sockets.
// Go's runtime signals its threads (preemption, GC), and a socket call with
// a timeout set (SO_RCVTIMEO, SO_SNDTIMEO) is never restarted after a
// signal: it fails with EINTR (signal(7), "Interruption of system calls").
// Go's own net package retries such calls (internal/poll ignoringEINTR);
// these helpers do the same for the tests' raw calls.

// connectRetry is connect(2) retried on EINTR. An interrupted blocking TCP
// connect goes on in the kernel; calling connect again waits for it
// (net/ipv4/af_inet.c __inet_stream_connect, SS_CONNECTING) and does not
// run the cgroup connect hook a second time (it runs only from
// SS_UNCONNECTED), so the retry neither picks again nor leaks a socket.
// EISCONN after EINTR means the first call's connect finished.
func connectRetry(fd int, to unix.Sockaddr) error {
	interrupted := false
	for {
		err := unix.Connect(fd, to)
		switch {
		case errors.Is(err, unix.EINTR):
			interrupted = true
		case interrupted && errors.Is(err, unix.EISCONN):
			return nil
		default:
			return err
		}
	}
}

// readRetry is read(2) retried on EINTR.
func readRetry(fd int, p []byte) (int, error) {
	for {
		n, err := unix.Read(fd, p)
		if !errors.Is(err, unix.EINTR) {
			return n, err
		}
	}
}

// sendtoRetry is sendto(2) retried on EINTR (nothing was sent when it
// fails so).
func sendtoRetry(fd int, p []byte, to unix.Sockaddr) error {
	for {
		err := unix.Sendto(fd, p, 0, to)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// interruptedRead blocks a read on a socket with SO_RCVTIMEO set, signals
// the reading thread with SIGURG (what Go's preemption sends) while it waits,
// then writes one byte; it returns what read does.
func interruptedRead(t *testing.T, read func(fd int, p []byte) (int, error)) (int, error) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	tv := unix.NsecToTimeval((5 * time.Second).Nanoseconds())
	if err := unix.SetsockoptTimeval(fds[0], unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tid := unix.Gettid()
	go func() {
		time.Sleep(100 * time.Millisecond)
		unix.Tgkill(unix.Getpid(), tid, unix.SIGURG)
		time.Sleep(100 * time.Millisecond)
		unix.Write(fds[1], []byte("x"))
	}()
	return read(fds[0], make([]byte, 1))
}

// TestReadRetry shows the failure the helpers guard against: a signal
// during a read with a receive timeout makes unix.Read fail with EINTR (the
// "interrupted system call" TestConnect6 once failed with), and readRetry
// returns the byte that arrives after it.
func TestReadRetry(t *testing.T) {
	if _, err := interruptedRead(t, unix.Read); !errors.Is(err, unix.EINTR) {
		t.Fatalf("plain read after a signal: err %v, want EINTR", err)
	}
	if n, err := interruptedRead(t, readRetry); n != 1 || err != nil {
		t.Fatalf("readRetry after a signal = %d, %v; want 1, nil", n, err)
	}
}
