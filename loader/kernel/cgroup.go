package kernel

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/cilium/ebpf"

	"github.com/loctree/loctree/bpf"
	"github.com/loctree/loctree/shared"
)

// cgroupID is the id of a cgroup v2 directory (its inode number).
func cgroupID(dir string) (uint64, error) {
	if err := CheckCgroup(dir); err != nil {
		return 0, fmt.Errorf("cgroup %s: %w", dir, err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return 0, fmt.Errorf("cgroup %s: %w", dir, err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino, nil
}

// cgroupLevel is the depth of a cgroup v2 directory below the root of its
// mount (the root is level 0), which is its level in the hierarchy when the
// mount shows the whole hierarchy, as /sys/fs/cgroup on a node does.
func cgroupLevel(dir string) (int, error) {
	p, err := filepath.Abs(dir)
	if err != nil {
		return 0, err
	}
	level := 0
	for parent := filepath.Dir(p); parent != p && isCgroup2(parent); parent = filepath.Dir(p) {
		p = parent
		level++
	}
	return level, nil
}

// SetCgroupLocality gives the workloads of a cgroup v2 directory and its
// descendants their own source locality (a gateway, a pod placed elsewhere
// than the node says); their connects walk the trees with it instead of the
// node's. The nearest cgroup with a locality wins.
func (in *Installer) SetCgroupLocality(dir string, loc shared.Locality) error {
	id, err := cgroupID(dir)
	if err != nil {
		return err
	}
	level, err := cgroupLevel(dir)
	if err != nil {
		return err
	}
	if err := in.setCgroupLocality(id, uint32(level), loc); err != nil {
		return err
	}
	return in.updateCgroupLevels()
}

func (in *Installer) setCgroupLocality(id uint64, level uint32, loc shared.Locality) error {
	if len(loc) > shared.MaxLevels {
		return fmt.Errorf("cgroup locality has %d scopes, at most %d", len(loc), shared.MaxLevels)
	}
	if level > maxCgroupLevel {
		return fmt.Errorf("cgroup at level %d: at most %d levels below the root", level, maxCgroupLevel)
	}
	v := bpf.Locality{Count: uint32(len(loc)), Level: level}
	for i, k := range slices.Sorted(maps.Keys(loc)) {
		v.Keys[i], v.Values[i] = shared.Label(k), shared.Label(loc[k])
	}
	if err := in.k.objs.LtCgroupSrc.Put(id, &v); err != nil {
		return fmt.Errorf("set cgroup locality: %w", err)
	}
	in.rememberCgroup(id, loc)
	return nil
}

// maxCgroupLevel is LT_MAX_CGROUP_LEVEL.
const maxCgroupLevel = 63

// updateCgroupLevels tells the programs which levels hold cgroup
// localities, so they look up only those.
func (in *Installer) updateCgroupLevels() error {
	var id, mask uint64
	var v bpf.Locality
	it := in.k.objs.LtCgroupSrc.Iterate()
	for it.Next(&id, &v) {
		mask |= 1 << v.Level
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("read cgroup localities: %w", err)
	}
	if err := in.k.objs.LtCgroupLevels.Put(uint32(0), mask); err != nil {
		return fmt.Errorf("set cgroup levels: %w", err)
	}
	return nil
}

// ClearCgroupLocality makes a cgroup use the node's locality again (or its
// nearest ancestor's).
func (in *Installer) ClearCgroupLocality(dir string) error {
	id, err := cgroupID(dir)
	if err != nil {
		return err
	}
	if err := in.k.objs.LtCgroupSrc.Delete(id); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("clear cgroup locality: %w", err)
	}
	in.rememberCgroup(id, nil)
	return in.updateCgroupLevels()
}
