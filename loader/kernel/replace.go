package kernel

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/cilium/ebpf"

	"github.com/loctree/loctree/bpf"
)

// treeMaps hold one installed tree: the service values and the regions
// they index. They are re-adopted or replaced together, never one alone:
// a re-adopted service value names regions of the maps it was written
// with. The other maps (redirected sockets, replies, connection counts,
// affinities, cgroup localities, counters) hold addresses and hints that
// the programs check before use, so each is kept when it still fits.
var treeMaps = []string{bpf.MapFrontends, bpf.MapNodes, bpf.MapEndpoints, bpf.MapRR, bpf.MapAffinityEps}

// sockMaps are replaced together too: the sockets and the counts they
// give back at close (load-aware counts per node, least_connections
// counts per backend). Counts kept with their sockets gone would never
// come down (a node wide for ever, a backend that looks busy for ever),
// and sockets kept with the counts new would take back what they never
// added.
var sockMaps = []string{bpf.MapSocks, bpf.MapWiden, bpf.MapConns}

// incompatiblePins lists the maps pinned in dir that spec cannot re-adopt
// (created with other capacities, or by an agent with another map
// layout), with every tree map when one of them is among them (and both
// socket maps when one is), and sets
// their specs to pin nothing: the programs get new maps, and the old
// pins stay in place, serving the programs still attached, until
// replacePins.
func incompatiblePins(spec *ebpf.CollectionSpec, dir string) ([]string, error) {
	var names []string
	for name, ms := range spec.Maps {
		if ms.Pinning != ebpf.PinByName {
			continue
		}
		m, err := ebpf.LoadPinnedMap(filepath.Join(dir, name), nil)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrPinned, err)
		}
		if ms.Compatible(m) != nil {
			names = append(names, name)
		}
		m.Close()
	}
	for _, group := range [][]string{treeMaps, sockMaps} {
		if slices.ContainsFunc(names, func(n string) bool { return slices.Contains(group, n) }) {
			for _, n := range group {
				if !slices.Contains(names, n) && spec.Maps[n].Pinning == ebpf.PinByName {
					names = append(names, n)
				}
			}
		}
	}
	slices.Sort(names)
	for _, n := range names {
		spec.Maps[n].Pinning = ebpf.PinNone
	}
	return names, nil
}

// replacePins pins the maps that replace incompatible pinned ones, once
// the programs that use them are attached: each old pin goes (its map goes
// when the last program holding it is gone) and the new map takes its
// path, so the next agent re-adopts the new maps.
func (in *Installer) replacePins() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	maps := mapsByName(in.k.objs.MapSet())
	for _, name := range in.k.replaced {
		path := filepath.Join(in.k.pinned, name)
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("replace pin %s: %w", path, err)
		}
		if err := maps[name].Pin(path); err != nil {
			return fmt.Errorf("replace pin %s: %w", path, err)
		}
	}
	if len(in.k.replaced) > 0 {
		in.log.Info("replaced the pinned maps this agent could not re-adopt", "bpffs", in.k.pinned, "maps", in.k.replaced)
	}
	in.k.replaced = nil
	return nil
}
