package kernel

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/loctree/loctree/bpf"
)

// pinnedObject is a map or link the agent pinned and keeps open.
type pinnedObject interface {
	Pin(string) error
	Unpin() error
}

// pinMaps records the maps pinned in the bpffs directory.
func (in *Installer) pinMaps() {
	if in.k.pinned == "" {
		return
	}
	for name, m := range mapsByName(in.k.objs.MapSet()) {
		if pinnedMap(name) {
			in.pins[filepath.Join(in.k.pinned, name)] = m
		}
	}
	in.pins[filepath.Join(in.k.pinned, mapGeneration)] = in.k.gen
}

// pinnedMap says whether the programs' map name is pinned: every map but
// the per-connect scratch (the source cgroup noted for the traffic count)
// and the traffic counts' zero value, which nothing outlives, and the
// priority loads' cache with its scratch slots, which a new agent starts
// empty.
func pinnedMap(name string) bool {
	switch name {
	case bpf.MapSrcCgroup, bpf.MapTrafficZero, bpf.MapLoadsCache:
		return false
	}
	return true
}

// CheckPins makes sure every map and link the agent pinned is still in its
// bpffs directory. The agent holds every object open, so the kernel path
// keeps working when a pin goes (the directory removed, the bpffs
// unmounted); but the pins are what keep it working after the agent
// exits, and what the next agent re-adopts. A missing pin is pinned again
// when the directory is on a bpffs; otherwise CheckPins returns an error
// and the agent reports itself unhealthy until the pins are back.
func (in *Installer) CheckPins() error {
	if in.k.pinned == "" {
		return nil
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	var missing []string
	for path := range in.pins {
		if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
			missing = append(missing, path)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := in.repin(missing); err != nil {
		return fmt.Errorf("%d of %d pins in %s are gone and cannot be restored (is the bpffs still mounted?): %w",
			len(missing), len(in.pins), in.k.pinned, err)
	}
	in.log.Warn("pins were gone and are restored", "bpffs", in.k.pinned, "pins", len(missing))
	return nil
}

// repin pins the missing objects again into a directory on a bpffs, and
// locks that directory (it may be a fresh mount).
func (in *Installer) repin(missing []string) error {
	parent := filepath.Dir(in.k.pinned)
	var st unix.Statfs_t
	if err := unix.Statfs(parent, &st); err != nil {
		return err
	}
	if st.Type != unix.BPF_FS_MAGIC {
		return fmt.Errorf("%s is not on a bpffs", parent)
	}
	if err := os.MkdirAll(in.k.pinned, 0o700); err != nil {
		return err
	}
	lock, err := lockDir(in.k.pinned)
	if err != nil {
		return err
	}
	in.k.lock.unlock()
	in.k.lock = lock
	for _, path := range missing {
		obj := in.pins[path]
		obj.Unpin() // forget the vanished path, so Pin pins anew
		if err := obj.Pin(path); err != nil {
			return fmt.Errorf("pin %s: %w", path, err)
		}
	}
	return nil
}
