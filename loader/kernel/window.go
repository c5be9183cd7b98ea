package kernel

import (
	"fmt"
	"os"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// mapWindow reads and writes an mmapable array map through a mapping of
// just the pages an access touches, made for the access and removed after
// it. The kernel inserts every page of a BPF array map's area into a
// mapping when it is made (kernel/bpf/arraymap.c, array_map_mmap →
// remap_vmalloc_range), so a mapping of the whole map kept open counts the
// whole map in the agent's resident set however little of it the agent
// writes: 20.5 MB at the default capacity. The map's memory is the
// kernel's either way; a window only keeps it out of the agent's RSS,
// which is what a node's memory limit and an operator's dashboard read.
type mapWindow struct {
	m    *ebpf.Map
	size int64 // bytes of the map's mmapable area
}

func newMapWindow(m *ebpf.Map) (*mapWindow, error) {
	if m.Flags()&unix.BPF_F_MMAPABLE == 0 {
		return nil, fmt.Errorf("map %s was not created with BPF_F_MMAPABLE", m)
	}
	return &mapWindow{m: m, size: int64(m.MaxEntries()) * int64(m.ValueSize())}, nil
}

// WriteAt copies b to the map at byte offset off.
func (w *mapWindow) WriteAt(b []byte, off int64) (int, error) {
	return w.access(b, off, true)
}

// ReadAt copies the map's bytes at off into b.
func (w *mapWindow) ReadAt(b []byte, off int64) (int, error) {
	return w.access(b, off, false)
}

func (w *mapWindow) access(b []byte, off int64, write bool) (int, error) {
	if off < 0 || off+int64(len(b)) > w.size {
		return 0, fmt.Errorf("%d bytes at %d are outside the %d-byte map", len(b), off, w.size)
	}
	if len(b) == 0 {
		return 0, nil
	}
	page := int64(os.Getpagesize())
	start := off / page * page
	length := int(off + int64(len(b)) - start)
	prot := unix.PROT_READ
	if write {
		prot |= unix.PROT_WRITE
	}
	mem, err := unix.Mmap(w.m.FD(), start, length, prot, unix.MAP_SHARED)
	if err != nil {
		return 0, fmt.Errorf("mmap %d bytes at %d: %w", length, start, err)
	}
	if write {
		copy(mem[off-start:], b)
	} else {
		copy(b, mem[off-start:])
	}
	if err := unix.Munmap(mem); err != nil {
		return 0, fmt.Errorf("munmap: %w", err)
	}
	return len(b), nil
}
