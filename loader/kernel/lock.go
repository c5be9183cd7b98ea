package kernel

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrLocked means another agent (or `agent --once`, or uninstall) is using
// the same bpffs directory. Two agents on one directory would each track
// only the regions they saw and reuse regions the other published.
var ErrLocked = errors.New("the bpffs directory is in use by another loctree agent")

// dirLock is an exclusive flock on a bpffs directory, held while an agent
// uses it. The kernel drops it when the process exits, however it exits.
type dirLock struct{ f *os.File }

// lockDir takes the lock on dir or fails at once with ErrLocked, naming
// the holder's pid when /proc/locks shows it.
func lockDir(dir string) (*dirLock, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("lock bpffs dir: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is locked by %s; stop it first (one agent per bpffs directory)", ErrLocked, dir, holder(dir))
		}
		return nil, fmt.Errorf("lock bpffs dir %s: %w", dir, err)
	}
	return &dirLock{f}, nil
}

func (l *dirLock) unlock() {
	if l != nil {
		l.f.Close() // closing the last descriptor releases the flock
	}
}

// holder names the process holding the flock on dir, from /proc/locks
// ("1: FLOCK ADVISORY WRITE PID MAJ:MIN:INODE 0 EOF").
func holder(dir string) string {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return "another process"
	}
	id := fmt.Sprintf("%02x:%02x:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
	f, err := os.Open("/proc/locks")
	if err != nil {
		return "another process"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 6 && fields[1] == "FLOCK" && fields[5] == id {
			return "pid " + fields[4]
		}
	}
	return "another process"
}
