package kernel

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/cilium/ebpf/link"

	"github.com/loctree/loctree/bpf"
	"github.com/loctree/loctree/shared"
)

// Installer writes trees into the BPF maps. Each service is published
// atomically: its nodes and endpoints go to fresh regions of the arrays and
// become visible with one replacement of its frontends value, so a connect
// walks either the old copy or the new one. The old regions are reused only
// after an RCU grace period that began after the replacement (grace.go).
// Services whose records did not change are not touched.
type Installer struct {
	mu          sync.Mutex
	k           *kernel
	locality    shared.Locality
	log         *slog.Logger
	nodes       *allocator
	eps         *allocator
	slots       *allocator
	installed   map[bpf.Frontend]bpf.Service
	retired     []retired // regions still possibly read, freed after their grace period
	grace       *grace
	gen         uint64
	links       []link.Link             // links this agent holds; Close detaches the unpinned ones
	pins        map[string]pinnedObject // what the agent pinned, by path (pins.go)
	digests     map[bpf.Frontend]digestCache
	byName      map[string]bpf.Frontend    // service name → its frontend; nil until a full Apply
	endpoints   int                        // eligible endpoints of the installed services
	eligible    map[bpf.Frontend]uint32    // eligible endpoints per installed service (a priority-load service installs all)
	kidScratch  kidSlots                   // where a service's child table is placed before it is written (kids.go)
	refused     map[string]error           // services of the installed tree the kernel does not install (refuse.go)
	pending     map[string]error           // refused of the tree being applied, until it is
	trafficMu   sync.Mutex                 // guards what Traffic reads: the two below
	cgroupLocs  map[uint64]shared.Locality // the cgroup localities this agent set, by cgroup id (traffic.go)
	trafficNode shared.Locality            // the node's locality
	orphans     map[bpf.WidenKey]bool      // load-aware counts no tree may name any more, deleted at 0 (widen.go)
	swept       bool                       // the counts an earlier agent left were taken as orphans
}

// Config configures an Installer.
type Config struct {
	// BPFFS is a directory on a bpffs mount where maps and links are pinned.
	// Empty pins nothing: everything goes away with Close.
	BPFFS string
	// Capacity sizes the maps; zero fields take DefaultCapacity's.
	Capacity Capacity
	// Locality is this node's locality, the source of its connections.
	Locality shared.Locality
	Logger   *slog.Logger
	// Replace lets Open take pinned maps it cannot re-adopt (created with
	// other capacities, or by an agent with another map layout): it creates
	// new maps, and Attach pins them in place of the old ones once the
	// programs that use them are attached; until then the programs already
	// attached keep serving from the old maps. Sockets redirected before
	// the switch lose what a replaced map held for them (getpeername's and
	// replies' VIP, connection counts). Without it such pins are an
	// ErrPinned error.
	Replace bool
}

// SetLocality changes this node's locality; the next Apply (or
// ApplyServices, which becomes a full Apply) rewrites the services whose
// source labels it changes.
func (in *Installer) SetLocality(loc shared.Locality) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.locality = loc
	in.byName = nil
	in.rememberNode(loc)
}

// Open loads the programs and creates the maps, or re-adopts the maps and
// services pinned in cfg.BPFFS by an earlier agent. Errors wrap ErrPinned
// when pinned maps cannot be re-adopted (and cfg.Replace is not set).
func Open(cfg Config) (*Installer, error) {
	c := cfg.Capacity
	d := DefaultCapacity()
	c.Services = cmpOr(c.Services, d.Services)
	c.Nodes = cmpOr(c.Nodes, d.Nodes)
	c.Endpoints = cmpOr(c.Endpoints, d.Endpoints)
	c.Sockets = cmpOr(c.Sockets, d.Sockets)
	c.Traffic = cmpOr(c.Traffic, d.Traffic)
	k, err := openKernel(cfg.BPFFS, c, cfg.Replace)
	if err != nil {
		return nil, err
	}
	in := &Installer{
		k: k, locality: cfg.Locality, log: cfg.Logger,
		nodes: newAllocator(c.Nodes), eps: newAllocator(c.Endpoints), slots: newAllocator(c.Services),
		installed: map[bpf.Frontend]bpf.Service{}, eligible: map[bpf.Frontend]uint32{}, digests: map[bpf.Frontend]digestCache{},
		pins: map[string]pinnedObject{}, cgroupLocs: map[uint64]shared.Locality{}, orphans: map[bpf.WidenKey]bool{},
	}
	in.rememberNode(cfg.Locality)
	in.pinMaps()
	if in.log == nil {
		in.log = slog.New(slog.DiscardHandler)
	}
	if err := in.adopt(); err != nil {
		k.close()
		return nil, err
	}
	// Regions an earlier agent retired are free in our allocators: wait out
	// any connect still walking them before the first Apply reuses them.
	if err := k.rcu.synchronize(); err != nil {
		k.close()
		return nil, err
	}
	in.grace = newGrace(k.rcu.synchronize, in.log)
	if len(k.replaced) > 0 {
		in.log.Warn("pinned maps differ from this agent's capacities or map layout: installing into new maps, which replace the pins once the programs are attached",
			"bpffs", cfg.BPFFS, "maps", k.replaced)
	}
	if len(in.installed) > 0 {
		in.log.Info("re-adopted pinned services", "services", len(in.installed), "generation", in.gen, "bpffs", cfg.BPFFS)
	}
	return in, nil
}

func cmpOr(v, def uint32) uint32 {
	if v == 0 {
		return def
	}
	return v
}

// adopt reads what an earlier agent left in the pinned maps.
func (in *Installer) adopt() error {
	var fe bpf.Frontend
	var svc bpf.Service
	it := in.k.objs.LtFrontends.Iterate()
	for it.Next(&fe, &svc) {
		if !in.nodes.reserve(span{svc.NodeBase, svc.NodeLen}) || !in.eps.reserve(span{svc.EpBase, svc.EpLen}) ||
			!in.slots.reserve(span{svc.Slot, 1}) {
			return fmt.Errorf("%w: service regions in the pinned maps overlap", ErrPinned)
		}
		in.installed[fe] = svc
		in.eligible[fe] = svc.EpLen // all endpoints of a priority-load service, until the first Apply recounts
		in.endpoints += int(svc.EpLen)
		in.gen = max(in.gen, svc.Generation)
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("read pinned frontends: %w", err)
	}
	saved, err := in.k.savedGeneration()
	in.gen = max(in.gen, saved)
	return err
}

// Generation is the highest generation installed (also one found in pinned
// maps at start).
func (in *Installer) Generation() uint64 {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.gen
}

// Close releases the agent's handles. Pinned maps and links stay (the
// kernel path keeps working); unpinned ones are detached and freed.
func (in *Installer) Close() error {
	var errs []error
	in.grace.close()
	for _, l := range in.links {
		errs = append(errs, l.Close())
	}
	errs = append(errs, in.k.close())
	return errors.Join(errs...)
}

// Stats sums the programs' per-CPU counters, indexed by bpf.Stat*: the
// redirects and the refusals by reason.
func (in *Installer) Stats() ([bpf.StatCount]uint64, error) { return in.k.stats() }

// PriorityPicks sums the programs' per-CPU picks by priority: entry 2·p
// counts priority p's healthy (or panic) picks, 2·p + 1 its degraded ones.
func (in *Installer) PriorityPicks() ([]uint64, error) { return in.k.priorityPicks() }
