package main

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/loctree/loctree/internal/topology"
	"github.com/loctree/loctree/shared"
)

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

// agentCaps are what the agent needs: loading programs and maps (CAP_BPF),
// programs that read kernel pointers (CAP_PERFMON) and attaching to a
// cgroup (CAP_NET_ADMIN). TestAgentLeastPrivileges holds the agent to them.
var agentCaps = []capability{capBPF, capPerfmon, capNetAdmin}

// requireCaps fails, naming what is missing, unless the process has the
// capabilities in its effective set. The kernel accepts CAP_SYS_ADMIN in
// place of CAP_BPF and CAP_PERFMON. A status it cannot read is no error:
// the kernel then has the last word.
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

// checkCgroup2 fails unless dir is a directory on a cgroup v2 mount.
func checkCgroup2(dir string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return fmt.Errorf("--cgroup %s: %w", dir, err)
	}
	if st.Type == unix.CGROUP2_SUPER_MAGIC {
		return nil
	}
	return fmt.Errorf("--cgroup %s: not a cgroup v2 directory (its filesystem is %s): give a directory on a cgroup2 mount "+
		"(on a cgroup v1 host: mkdir -p /run/loctree/cgroupv2 && mount -t cgroup2 none /run/loctree/cgroupv2)", dir, fsName(st.Type))
}

// checkBPFFS fails unless dir, or the nearest directory above it that
// exists, is on a bpffs mount (the agent creates dir).
func checkBPFFS(dir string) error {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		var st unix.Statfs_t
		err := unix.Statfs(d, &st)
		if errors.Is(err, fs.ErrNotExist) && d != filepath.Dir(d) {
			continue
		}
		if err != nil {
			return fmt.Errorf("--bpffs %s: %w", dir, err)
		}
		if st.Type == unix.BPF_FS_MAGIC {
			return nil
		}
		return fmt.Errorf("--bpffs %s: %s is not on a bpffs mount (its filesystem is %s): mount one (mount -t bpf bpf /sys/fs/bpf) and give a directory on it", dir, d, fsName(st.Type))
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

// checkLocalityKeys refuses a key that is a scope of no service of the
// topology (a typo such as regoin= would route as if it were not given).
func checkLocalityKeys(flag string, loc shared.Locality, top *shared.Topology, name string) error {
	scopes := topologyScopes(top)
	for k := range loc {
		if !scopes[k] {
			return fmt.Errorf("%s: %q is not a scope of any service in %s (its scopes: %s; nearest: %s)",
				flag, k, name, strings.Join(sortedKeys(scopes), ", "), strings.Join(nearest(k, scopes, 1), ", "))
		}
	}
	return nil
}

func topologyScopes(top *shared.Topology) map[string]bool {
	out := map[string]bool{}
	for _, s := range top.Services {
		scopes := s.Scopes
		if len(scopes) == 0 {
			scopes = shared.DefaultScopes()
		}
		for _, sc := range scopes {
			out[sc] = true
		}
	}
	return out
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// loadAgentTopology reads the agent's topology for the checks above; a
// topology that does not load is left to the agent, which reports it.
func loadAgentTopology(path string) (*shared.Topology, string, bool) {
	top, name, err := topology.LoadOrDefault(path)
	return top, name, err == nil
}
