package loader

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/loctree/loctree/bpf"
	"github.com/loctree/loctree/shared"
)

// Installer writes trees into the BPF maps. Each service is published
// atomically: its nodes and endpoints go to fresh regions of the arrays and
// become visible with one replacement of its frontends value, so a connect
// walks either the old copy or the new one. The old regions are reused only
// one Apply later. Services whose records did not change are not touched.
type Installer struct {
	mu        sync.Mutex
	k         *kernel
	locality  shared.Locality
	log       *slog.Logger
	nodes     *allocator
	eps       *allocator
	slots     *allocator
	installed map[bpf.Frontend]bpf.Service
	retired   []bpf.Service // regions still possibly read, freed next Apply
	gen       uint64
	links     []link.Link // unpinned attachments, detached by Close
	digests   map[bpf.Frontend]digestCache
}

// digestCache remembers a service's records in the previous tree: equal
// bytes at the same indices have the same digest, which saves hashing the
// unchanged services of a big tree on every Apply.
type digestCache struct {
	root, epFirst uint32
	settings      [4]uint8
	src           [shared.MaxLevels]uint64
	nodes, eps    []byte
	digest        uint64
}

// Result says what one Apply did.
type Result struct {
	Generation uint64
	Services   int // services with a VIP, installed
	Endpoints  int // their eligible endpoints
	Rewritten  int // services written (new or changed)
	Removed    int
	Duration   time.Duration
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
		in.gen = max(in.gen, svc.Generation)
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("read pinned frontends: %w", err)
	}
	return nil
}

// Generation is the highest generation installed (also one found in pinned
// maps at start).
func (in *Installer) Generation() uint64 {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.gen
}

// plan is one service of a tree as the kernel should hold it.
type plan struct {
	fe     bpf.Frontend
	svc    *shared.Service
	src    [shared.MaxLevels]uint64
	digest uint64
}

func (in *Installer) plans(t *shared.Tree) (map[bpf.Frontend]plan, int) {
	out := map[bpf.Frontend]plan{}
	endpoints := 0
	for i := range t.Services() {
		s := &t.Services()[i]
		if !s.VIP.IsValid() {
			continue
		}
		p := plan{fe: frontendOf(s.VIP), svc: s, src: sourceLabels(s, in.locality)}
		p.digest = in.cachedDigest(t, &p)
		out[p.fe] = p
		endpoints += int(s.EpEligible)
	}
	for fe := range in.digests {
		if _, ok := out[fe]; !ok {
			delete(in.digests, fe)
		}
	}
	return out, endpoints
}

// cachedDigest is digest(t, p.svc, p.src), reusing the previous tree's value
// when the service's records are byte-identical at the same indices.
func (in *Installer) cachedDigest(t *shared.Tree, p *plan) uint64 {
	s := p.svc
	nodes, eps := records(t, s)
	c := digestCache{root: s.Root, epFirst: s.EpFirst, src: p.src, nodes: nodes, eps: eps,
		settings: [4]uint8{uint8(len(s.Scopes)), uint8(s.Mode), uint8(s.Policy), uint8(s.Health)}}
	if old, ok := in.digests[p.fe]; ok && old.root == c.root && old.epFirst == c.epFirst &&
		old.settings == c.settings && old.src == c.src && bytes.Equal(old.nodes, nodes) && bytes.Equal(old.eps, eps) {
		return old.digest
	}
	c.digest = digest(t, s, p.src)
	in.digests[p.fe] = c
	return c.digest
}

// Apply installs tree t. Services that are new or changed are written,
// services gone from t are removed, the rest stay as they are. A tree that
// does not fit the maps returns an error wrapping ErrCapacity and changes
// nothing.
func (in *Installer) Apply(t *shared.Tree) (Result, error) {
	start := time.Now()
	in.mu.Lock()
	defer in.mu.Unlock()
	plans, endpoints := in.plans(t)
	var changed []plan
	for fe, p := range plans {
		if old, ok := in.installed[fe]; !ok || old.Digest != p.digest {
			changed = append(changed, p)
		}
	}
	if err := in.fits(plans, changed); err != nil {
		return Result{}, err
	}
	in.freeRetired()
	res := Result{Generation: t.Generation(), Services: len(plans), Endpoints: endpoints}
	// Removals first: the frontends map never holds more than its capacity.
	for fe, old := range in.installed {
		if _, ok := plans[fe]; ok {
			continue
		}
		if err := in.k.objs.LtFrontends.Delete(&fe); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return res, fmt.Errorf("remove service: %w", err)
		}
		delete(in.installed, fe)
		in.retired = append(in.retired, old)
		in.slots.release(span{old.Slot, 1})
		res.Removed++
	}
	for _, p := range changed {
		if err := in.write(t, p); err != nil {
			return res, err
		}
		res.Rewritten++
	}
	in.gen = max(in.gen, t.Generation())
	in.warnPolicies(changed)
	res.Duration = time.Since(start)
	return res, nil
}

// fits checks, on copies of the allocators, that every changed service gets
// its regions while the old copies stay readable.
func (in *Installer) fits(plans map[bpf.Frontend]plan, changed []plan) error {
	if n := uint32(len(plans)); n > in.k.capacity().Services {
		return fmt.Errorf("%w: %d services with a VIP, capacity %d (--max-services)", ErrCapacity, n, in.k.capacity().Services)
	}
	nodes, eps := in.nodes.clone(), in.eps.clone()
	for _, r := range in.retired {
		nodes.release(span{r.NodeBase, r.NodeLen})
		eps.release(span{r.EpBase, r.EpLen})
	}
	for _, p := range changed {
		if _, ok := nodes.alloc(p.svc.NodeCount); !ok {
			return fmt.Errorf("%w: service %s needs %d nodes, %d of %d free (--max-nodes; updates need room for old and new copies)",
				ErrCapacity, p.svc.Name, p.svc.NodeCount, nodes.available(), nodes.size)
		}
		if _, ok := eps.alloc(p.svc.EpEligible); !ok {
			return fmt.Errorf("%w: service %s needs %d endpoints, %d of %d free (--max-endpoints; updates need room for old and new copies)",
				ErrCapacity, p.svc.Name, p.svc.EpEligible, eps.available(), eps.size)
		}
	}
	return nil
}

func (in *Installer) freeRetired() {
	for _, r := range in.retired {
		in.nodes.release(span{r.NodeBase, r.NodeLen})
		in.eps.release(span{r.EpBase, r.EpLen})
	}
	in.retired = in.retired[:0]
}

// write copies a service's records to fresh regions and publishes them.
func (in *Installer) write(t *shared.Tree, p plan) error {
	s := p.svc
	nb, ok1 := in.nodes.alloc(s.NodeCount)
	eb, ok2 := in.eps.alloc(s.EpEligible)
	if !ok1 || !ok2 {
		return fmt.Errorf("%w: service %s (checked before, allocator out of sync)", ErrCapacity, s.Name)
	}
	nodes, eps := records(t, s)
	if _, err := in.k.nodes.WriteAt(nodes, int64(nb)*shared.NodeRecordSize); err != nil {
		return fmt.Errorf("write nodes of %s: %w", s.Name, err)
	}
	if _, err := in.k.eps.WriteAt(eps, int64(eb)*shared.EndpointRecordSize); err != nil {
		return fmt.Errorf("write endpoints of %s: %w", s.Name, err)
	}
	v := bpf.Service{
		Src: p.src, Digest: p.digest, Generation: t.Generation(),
		Root: nb, NodeDelta: nb - s.Root, EpDelta: eb - s.EpFirst,
		NodeBase: nb, NodeLen: s.NodeCount, EpBase: eb, EpLen: s.EpEligible,
		Levels: uint8(len(s.Scopes)), Mode: uint8(s.Mode), Policy: uint8(s.Policy), Health: uint8(s.Health),
	}
	old, had := in.installed[p.fe]
	if had {
		v.Slot = old.Slot
	} else if v.Slot, ok1 = in.slots.alloc(1); !ok1 {
		return fmt.Errorf("%w: no service slot for %s", ErrCapacity, s.Name)
	}
	if err := in.k.objs.LtFrontends.Put(&p.fe, &v); err != nil {
		return fmt.Errorf("publish %s: %w", s.Name, err)
	}
	in.installed[p.fe] = v
	if had {
		in.retired = append(in.retired, old)
	}
	return nil
}

// warnPolicies logs the policies the kernel does not implement.
func (in *Installer) warnPolicies(changed []plan) {
	for _, p := range changed {
		if p.svc.Policy == shared.PolicyLeastRequest || p.svc.Policy == shared.PolicyConsistentHash {
			in.log.Warn("policy not implemented in the kernel, connections use random", "service", p.svc.Name, "policy", p.svc.Policy.String())
		}
	}
}
