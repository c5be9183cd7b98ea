package kernel

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/cilium/ebpf"

	"github.com/loctree/loctree/bpf"
	"github.com/loctree/loctree/shared"
	"github.com/loctree/loctree/shared/wire"
)

// Result says what one Apply did.
type Result struct {
	Generation uint64
	Services   int // services with a VIP, installed
	Endpoints  int // their eligible endpoints
	Rewritten  int // services written (new or changed)
	Removed    int
	Duration   time.Duration
	// Refused are the services of the tree with a VIP that the kernel
	// does not install, by name, with why (Refusal); nil when none is.
	Refused map[string]error
}

// plan is one service of a tree as the kernel should hold it.
type plan struct {
	fe     bpf.Frontend
	svc    *shared.Service
	src    [shared.MaxLevels]uint64
	digest uint64
	region []byte // node region of a service to write: its records and child table (regionOf)
	kids   uint32 // home slots of its child table
}

func (in *Installer) plans(t *shared.Tree) (map[bpf.Frontend]plan, int) {
	out := map[bpf.Frontend]plan{}
	endpoints := 0
	in.pending = map[string]error{}
	for _, s := range t.Services() {
		if !s.VIP().IsValid() || in.refuse(s) {
			continue
		}
		p := plan{fe: FrontendOf(s.VIP()), svc: s, src: sourceLabels(s, in.locality)}
		p.digest = in.cachedDigest(t, &p)
		out[p.fe] = p
		endpoints += int(s.EligibleCount())
	}
	for fe := range in.digests {
		if _, ok := out[fe]; !ok {
			delete(in.digests, fe)
		}
	}
	return out, endpoints
}

// ApplyServices installs tree t, which differs from the tree applied last
// only in the services named in changed (added, changed or removed ones):
// its cost is the changed services' records, independent of the number of
// services in t. Before a full Apply in this process (the first tree, or
// maps re-adopted from an earlier agent, whose service names are unknown)
// it is Apply. Errors are Apply's; a tree that does not fit changes
// nothing.
func (in *Installer) ApplyServices(t *shared.Tree, changed []string) (Result, error) {
	in.mu.Lock()
	if in.byName == nil {
		in.mu.Unlock()
		return in.Apply(t)
	}
	defer in.mu.Unlock()
	start := time.Now()
	// The digest cache holds slices of the tree of the last full Apply; kept
	// across per-service applies it would keep every such tree alive.
	clear(in.digests)
	plans, gone := in.changedPlans(t, changed)
	var write []plan
	for _, p := range plans {
		if old, ok := in.installed[p.fe]; !ok || old.Digest != p.digest {
			write = append(write, p)
		}
	}
	if err := in.prepare(t, write); err != nil {
		return Result{}, err
	}
	if err := in.makeRoom(in.servicesAfter(plans, gone), write); err != nil {
		return Result{}, err
	}
	res := Result{Generation: t.Generation()}
	for _, fe := range gone {
		if err := in.remove(fe); err != nil {
			return res, err
		}
		res.Removed++
	}
	for _, name := range changed {
		delete(in.byName, name)
	}
	for _, p := range plans {
		in.byName[p.svc.Name()] = p.fe
	}
	if err := in.writeAll(t, write, &res); err != nil {
		return res, err
	}
	in.refused = in.pending
	res.Services, res.Endpoints, res.Refused = len(in.installed), in.endpoints, in.refusals()
	res.Duration = time.Since(start)
	return res, nil
}

// servicesAfter is the number of frontends installed once plans are
// written and gone removed: a plan for a frontend already installed
// replaces it.
func (in *Installer) servicesAfter(plans []plan, gone []bpf.Frontend) int {
	n := len(in.installed) - len(gone)
	for _, p := range plans {
		if _, ok := in.installed[p.fe]; !ok {
			n++
		}
	}
	return n
}

// changedPlans are the plans of the named services that have a VIP in t,
// and the installed frontends that the named services no longer hold.
func (in *Installer) changedPlans(t *shared.Tree, changed []string) ([]plan, []bpf.Frontend) {
	var plans []plan
	claimed := map[bpf.Frontend]bool{}
	in.pending = maps.Clone(in.refused) // the services not named keep their refusal
	if in.pending == nil {
		in.pending = map[string]error{}
	}
	for _, name := range changed {
		delete(in.pending, name)
		s, ok := t.Service(name)
		if !ok || s.Name() != name || !s.VIP().IsValid() || in.refuse(s) {
			continue
		}
		p := plan{fe: FrontendOf(s.VIP()), svc: s, src: sourceLabels(s, in.locality)}
		p.digest = digest(t, s, p.src)
		plans = append(plans, p)
		claimed[p.fe] = true
	}
	var gone []bpf.Frontend
	for _, name := range changed {
		fe, ok := in.byName[name]
		if !ok {
			continue
		}
		if _, installed := in.installed[fe]; installed && !claimed[fe] && !slices.Contains(gone, fe) {
			gone = append(gone, fe)
		}
	}
	return plans, gone
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
	if err := in.prepare(t, changed); err != nil {
		return Result{}, err
	}
	if err := in.makeRoom(len(plans), changed); err != nil {
		return Result{}, err
	}
	res := Result{Generation: t.Generation(), Services: len(plans), Endpoints: endpoints}
	// Removals first: the frontends map never holds more than its capacity.
	removed, err := in.removeGone(plans)
	res.Removed = removed
	if err != nil {
		return res, err
	}
	in.byName = make(map[string]bpf.Frontend, len(plans))
	for fe, p := range plans {
		in.byName[p.svc.Name()] = fe
	}
	if err := in.writeAll(t, changed, &res); err != nil {
		return res, err
	}
	for fe, p := range plans { // recounts services re-adopted unchanged, too
		in.eligible[fe] = p.svc.EligibleCount()
	}
	in.endpoints = endpoints
	in.refused = in.pending
	res.Refused = in.refusals()
	res.Duration = time.Since(start)
	return res, nil
}

// writeAll writes the changed services, then the generation.
func (in *Installer) writeAll(t *shared.Tree, changed []plan, res *Result) error {
	for _, p := range changed {
		if err := in.write(t, p); err != nil {
			return err
		}
		res.Rewritten++
	}
	in.gen = max(in.gen, t.Generation())
	if err := in.k.saveGeneration(in.gen); err != nil {
		in.log.Warn("an agent restarted later may reuse this generation", "err", err)
	}
	return nil
}

// removeGone unpublishes the installed services that are not in plans.
func (in *Installer) removeGone(plans map[bpf.Frontend]plan) (int, error) {
	n := 0
	for fe := range in.installed {
		if _, ok := plans[fe]; ok {
			continue
		}
		if err := in.remove(fe); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// remove unpublishes one installed service.
func (in *Installer) remove(fe bpf.Frontend) error {
	old := in.installed[fe]
	if err := in.k.objs.LtFrontends.Delete(&fe); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("remove service: %w", err)
	}
	delete(in.installed, fe)
	in.endpoints -= int(in.eligible[fe])
	delete(in.eligible, fe)
	in.retire(old)
	in.slots.release(span{old.Slot, 1})
	return nil
}

// fits checks, on copies of the allocators, that every changed service gets
// its regions while the old copies stay readable, and that services
// frontends fit.
func (in *Installer) fits(services int, changed []plan) error {
	if n := uint32(services); n > in.k.capacity().Services {
		return fmt.Errorf("%w: %d services with a VIP, capacity %d (--max-services)", ErrCapacity, n, in.k.capacity().Services)
	}
	nodes, eps := in.nodes.clone(), in.eps.clone()
	for _, p := range changed {
		if _, ok := nodes.alloc(regionLen(p)); !ok {
			return fmt.Errorf("%w: service %s needs %d nodes (%d records, %d child table slots, %d load-aware records), %d of %d free (--max-nodes; updates need room for old and new copies)",
				ErrCapacity, p.svc.Name(), regionLen(p), nodeLen(p.svc), regionLen(p)-nodeLen(p.svc)-widenLen(p.svc), widenLen(p.svc), nodes.available(), nodes.size)
		}
		if _, ok := eps.alloc(epLen(p.svc)); !ok {
			return fmt.Errorf("%w: service %s needs %d endpoints, %d of %d free (--max-endpoints; updates need room for old and new copies)",
				ErrCapacity, p.svc.Name(), epLen(p.svc), eps.available(), eps.size)
		}
	}
	return nil
}

// retired holds the regions of a service value that is no longer
// published; they are free once grace period after has ended.
type retired struct {
	svc   bpf.Service
	after uint64
}

// retire queues the regions of a service value that was just replaced or
// removed behind the next grace period.
func (in *Installer) retire(old bpf.Service) {
	in.retired = append(in.retired, retired{old, in.grace.next()})
}

// reclaim frees the retired regions whose grace period has ended.
func (in *Installer) reclaim() {
	keep := in.retired[:0]
	for _, r := range in.retired {
		if !in.grace.ended(r.after) {
			keep = append(keep, r)
			continue
		}
		in.orphanCounts(r.svc) // read before the region is free
		in.nodes.release(span{r.svc.NodeBase, r.svc.NodeLen})
		in.eps.release(span{r.svc.EpBase, r.svc.EpLen})
	}
	in.retired = keep
}

// makeRoom checks that the changed services fit; when they fit only with
// regions still waiting for their grace period, it waits for it.
func (in *Installer) makeRoom(services int, changed []plan) error {
	in.reclaim()
	if err := in.sweepCounts(); err != nil {
		return err
	}
	err := in.fits(services, changed)
	if !errors.Is(err, ErrCapacity) || len(in.retired) == 0 {
		return err
	}
	if !in.grace.wait(in.retired[len(in.retired)-1].after) {
		return err
	}
	in.reclaim()
	return in.fits(services, changed)
}

// prepare lays out the node regions of the services to write: their
// records and their child tables.
func (in *Installer) prepare(t *shared.Tree, changed []plan) error {
	for i := range changed {
		p := &changed[i]
		var err error
		if p.region, p.kids, err = regionOf(t, p.svc, &in.kidScratch); err != nil {
			return err
		}
	}
	return nil
}

// write copies a service's records to fresh regions and publishes them.
func (in *Installer) write(t *shared.Tree, p plan) error {
	s := p.svc
	nb, ok1 := in.nodes.alloc(regionLen(p))
	eb, ok2 := in.eps.alloc(epLen(s))
	if !ok1 || !ok2 {
		return fmt.Errorf("%w: service %s (checked before, allocator out of sync)", ErrCapacity, s.Name())
	}
	_, eps := records(t, s)
	if _, err := in.k.nodes.WriteAt(p.region, int64(nb)*wire.NodeRecordSize); err != nil {
		return fmt.Errorf("write nodes of %s: %w", s.Name(), err)
	}
	if _, err := in.k.eps.WriteAt(eps, int64(eb)*wire.EndpointRecordSize); err != nil {
		return fmt.Errorf("write endpoints of %s: %w", s.Name(), err)
	}
	if err := in.writeAffinityEps(p, eps[:affinityLen(s)*wire.EndpointRecordSize], eb); err != nil {
		return err
	}
	if err := in.createCounts(p); err != nil {
		return err
	}
	v := serviceValue(t, p, nb, eb)
	old, had := in.installed[p.fe]
	if had {
		v.Slot = old.Slot
	} else if v.Slot, ok1 = in.slots.alloc(1); !ok1 {
		return fmt.Errorf("%w: no service slot for %s", ErrCapacity, s.Name())
	}
	if err := in.k.objs.LtFrontends.Put(&p.fe, &v); err != nil {
		return fmt.Errorf("publish %s: %w", s.Name(), err)
	}
	in.installed[p.fe] = v
	in.endpoints += int(s.EligibleCount()) - int(in.eligible[p.fe])
	in.eligible[p.fe] = s.EligibleCount()
	if had {
		in.retire(old)
	}
	return nil
}
