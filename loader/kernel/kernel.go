package kernel

import (
	"errors"
	"fmt"
	"os"

	"github.com/cilium/ebpf"

	"github.com/loctree/loctree/bpf"
)

// Capacity sizes the BPF maps. A tree that does not fit is rejected before
// anything changes. Pinned maps keep the size they were created with: an
// agent started with other capacities replaces them (Config.Replace).
type Capacity struct {
	Services  uint32 // services with a VIP
	Nodes     uint32 // tree nodes of all services and their child tables (about 2 slots per node: kids.go), twice for double-buffering
	Endpoints uint32 // eligible endpoints of all services, same
	Sockets   uint32 // redirected sockets open at once; more are redirected but not remembered; also session affinities (client × service), the least recently used dropped first
}

// DefaultCapacity fits 100,000 endpoints rewritten all at once, in trees of
// up to about 85,000 nodes (each with its child table).
func DefaultCapacity() Capacity {
	return Capacity{Services: 4096, Nodes: 1 << 19, Endpoints: 1 << 18, Sockets: 1 << 16}
}

// kernel is the loaded programs and the (possibly re-adopted) maps.
type kernel struct {
	objs   bpf.Objects
	nodes  *mapWindow
	eps    *mapWindow
	gen    *ebpf.Map // generation of the last applied tree (generation.go)
	rcu    *rcuSync  // waits for RCU grace periods (grace.go)
	lock   *dirLock  // one agent per bpffs directory
	pinned string    // bpffs directory, "" when not pinned
	// replaced are the maps that replace pinned ones this agent could not
	// re-adopt; they are pinned once the programs are attached.
	replaced []string
}

// openKernel loads the programs and creates the maps, or re-adopts the maps
// pinned in pinDir by an earlier agent. pinDir "" pins nothing. Pinned maps
// that cannot be re-adopted (other capacities, another map layout) are an
// ErrPinned error, or with replace get new maps (incompatiblePins).
func openKernel(pinDir string, c Capacity, replace bool) (*kernel, error) {
	spec, err := bpf.Spec()
	if err != nil {
		return nil, err
	}
	sizes := map[string]uint32{
		bpf.MapFrontends: c.Services, bpf.MapRR: c.Services,
		bpf.MapNodes: c.Nodes, bpf.MapEndpoints: c.Endpoints, bpf.MapConns: c.Endpoints,
		bpf.MapSocks: c.Sockets, bpf.MapRev: c.Sockets,
		bpf.MapAffinity: c.Sockets, bpf.MapAffinityEps: c.Endpoints,
	}
	for name, m := range spec.Maps {
		if n, ok := sizes[name]; ok {
			m.MaxEntries = n
		}
		if pinDir != "" && pinnedMap(name) {
			m.Pinning = ebpf.PinByName
		}
	}
	var opts ebpf.CollectionOptions
	k := &kernel{pinned: pinDir}
	if pinDir != "" {
		if err := os.MkdirAll(pinDir, 0o700); err != nil {
			return nil, fmt.Errorf("bpffs dir: %w", err)
		}
		if k.lock, err = lockDir(pinDir); err != nil {
			return nil, err
		}
		opts.Maps.PinPath = pinDir
	}
	err = loadObjects(spec, &k.objs, opts)
	if errors.Is(err, ebpf.ErrMapIncompatible) && replace {
		if k.replaced, err = incompatiblePins(spec, pinDir); err == nil {
			err = loadObjects(spec, &k.objs, opts)
		}
	}
	if err != nil {
		k.lock.unlock()
		if errors.Is(err, ebpf.ErrMapIncompatible) {
			return nil, fmt.Errorf("%w: maps in %s differ from the capacity flags or from this agent's map layout (run `loctree agent uninstall` first, or use the earlier flags and version): %w", ErrPinned, pinDir, err)
		}
		return nil, fmt.Errorf("load BPF programs: %w", err)
	}
	if err := k.openWindows(); err != nil {
		k.close()
		return nil, err
	}
	if k.gen, err = openGeneration(pinDir); err != nil {
		k.close()
		return nil, err
	}
	if k.rcu, err = newRCUSync(); err != nil {
		k.close()
		return nil, err
	}
	return k, nil
}

// openWindows prepares the per-write mappings of the node and endpoint maps.
func (k *kernel) openWindows() error {
	var err error
	if k.nodes, err = newMapWindow(k.objs.LtNodes); err != nil {
		return fmt.Errorf("nodes map: %w", err)
	}
	if k.eps, err = newMapWindow(k.objs.LtEndpoints); err != nil {
		return fmt.Errorf("endpoints map: %w", err)
	}
	return nil
}

// capacity reports the sizes of the loaded maps.
func (k *kernel) capacity() Capacity {
	return Capacity{
		Services:  k.objs.LtFrontends.MaxEntries(),
		Nodes:     k.objs.LtNodes.MaxEntries(),
		Endpoints: k.objs.LtEndpoints.MaxEntries(),
	}
}

// stats sums the kernel's per-CPU counters.
func (k *kernel) stats() ([bpf.StatCount]uint64, error) {
	var out [bpf.StatCount]uint64
	for i := range bpf.StatCount {
		var per []uint64
		if err := k.objs.LtStats.Lookup(i, &per); err != nil {
			return out, fmt.Errorf("read stats: %w", err)
		}
		for _, v := range per {
			out[i] += v
		}
	}
	return out, nil
}

// priorityPicks sums the kernel's per-CPU picks by priority: entry 2·p
// counts priority p's healthy (or panic) picks, 2·p + 1 its degraded ones.
func (k *kernel) priorityPicks() ([]uint64, error) {
	out := make([]uint64, k.objs.LtPrioPicks.MaxEntries())
	for i := range out {
		var per []uint64
		if err := k.objs.LtPrioPicks.Lookup(uint32(i), &per); err != nil {
			return nil, fmt.Errorf("read priority picks: %w", err)
		}
		for _, v := range per {
			out[i] += v
		}
	}
	return out, nil
}

func (k *kernel) close() error {
	if k.gen != nil {
		k.gen.Close()
	}
	if k.rcu != nil {
		k.rcu.close()
	}
	defer k.lock.unlock()
	return k.objs.Close()
}
