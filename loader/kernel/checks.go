package kernel

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// What the kernel path needs of the node, checked before anything is
// loaded so that a missing privilege or a wrong mount is named, not met
// as the kernel's EPERM or EBADF halfway through a start.

// capability is a Linux capability: its bit in /proc/self/status CapEff.
type capability struct {
	bit  uint
	name string
}

var (
	capNetAdmin = capability{12, "CAP_NET_ADMIN"}
	capSysAdmin = capability{21, "CAP_SYS_ADMIN"}
	capPerfmon  = capability{38, "CAP_PERFMON"}
	capBPF      = capability{39, "CAP_BPF"}
)

// Need is what an operation of this package needs the process to be
// allowed: a set of Load, Attach and Pins.
type Need uint8

const (
	// Load is Open: loading the programs (some read kernel pointers) and
	// creating maps: CAP_BPF and CAP_PERFMON.
	Load Need = 1 << iota
	// Attach is Attach, and Uninstall with a cgroup: CAP_NET_ADMIN.
	Attach
	// Pins is Uninstall: opening and removing pinned objects: CAP_BPF.
	Pins
)

// capabilities are the capabilities need stands for.
func (need Need) capabilities() []capability {
	var out []capability
	if need&(Load|Pins) != 0 {
		out = append(out, capBPF)
	}
	if need&Load != 0 {
		out = append(out, capPerfmon)
	}
	if need&Attach != 0 {
		out = append(out, capNetAdmin)
	}
	return out
}

// CheckCapabilities fails, naming what is missing, unless the process has
// what need stands for in its effective capability set; what names the
// operation in the error. The kernel accepts CAP_SYS_ADMIN in place of
// CAP_BPF and CAP_PERFMON. A status it cannot read is no error: the kernel
// then has the last word. The agent's least-privilege test holds Run to
// Load|Attach.
func CheckCapabilities(what string, need Need) error {
	return requireCaps(what, need.capabilities()...)
}

func requireCaps(what string, need ...capability) error {
	eff, err := effectiveCaps()
	if err != nil {
		return nil
	}
	has := func(c capability) bool { return eff&(1<<c.bit) != 0 }
	var missing []string
	for _, c := range need {
		if !has(c) && !((c == capBPF || c == capPerfmon) && has(capSysAdmin)) {
			missing = append(missing, c.name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("%s needs root or %s; this process lacks %s", what, capNames(need), strings.Join(missing, ", "))
}

func capNames(cs []capability) string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.name
	}
	return strings.Join(names, ", ")
}

// effectiveCaps reads CapEff from /proc/self/status.
func effectiveCaps() (uint64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "CapEff:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	return 0, errors.New("no CapEff in /proc/self/status")
}

// CheckCgroup fails unless dir is a directory on a cgroup v2 mount, what
// Attach needs; the error names the filesystem dir is on.
func CheckCgroup(dir string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return err
	}
	if st.Type == unix.CGROUP2_SUPER_MAGIC {
		return nil
	}
	return fmt.Errorf("not a cgroup v2 directory (its filesystem is %s): give a directory on a cgroup2 mount "+
		"(on a cgroup v1 host: mkdir -p /run/loctree/cgroupv2 && mount -t cgroup2 none /run/loctree/cgroupv2)", fsName(st.Type))
}

// isCgroup2 reports whether dir is on a cgroup v2 mount.
func isCgroup2(dir string) bool {
	var st unix.Statfs_t
	return unix.Statfs(dir, &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC
}

// CheckBPFFS fails unless dir, or the nearest directory above it that
// exists, is on a bpffs mount (Open creates dir); the error names the
// filesystem it is on.
func CheckBPFFS(dir string) error {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		var st unix.Statfs_t
		err := unix.Statfs(d, &st)
		if errors.Is(err, fs.ErrNotExist) && d != filepath.Dir(d) {
			continue
		}
		if err != nil {
			return err
		}
		if st.Type == unix.BPF_FS_MAGIC {
			return nil
		}
		return fmt.Errorf("%s is not on a bpffs mount (its filesystem is %s): mount one (mount -t bpf bpf /sys/fs/bpf) and give a directory on it", d, fsName(st.Type))
	}
}

func fsName(magic int64) string {
	switch magic {
	case unix.CGROUP_SUPER_MAGIC:
		return "cgroup v1"
	case unix.TMPFS_MAGIC:
		return "tmpfs"
	case unix.BPF_FS_MAGIC:
		return "bpffs"
	case unix.SYSFS_MAGIC:
		return "sysfs"
	case unix.EXT4_SUPER_MAGIC: // also ext2 and ext3
		return "ext4"
	case unix.XFS_SUPER_MAGIC:
		return "xfs"
	case unix.BTRFS_SUPER_MAGIC:
		return "btrfs"
	case unix.OVERLAYFS_SUPER_MAGIC:
		return "overlayfs"
	case unix.PROC_SUPER_MAGIC:
		return "proc"
	case unix.NFS_SUPER_MAGIC:
		return "nfs"
	case unix.SQUASHFS_MAGIC:
		return "squashfs"
	case unix.DEBUGFS_MAGIC:
		return "debugfs"
	case unix.TRACEFS_MAGIC:
		return "tracefs"
	}
	return fmt.Sprintf("type %#x", magic)
}
