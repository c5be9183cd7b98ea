package loader

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/loctree/loctree/loader/source"
	"github.com/loctree/loctree/shared"
)

// The agent's one update path, for every source: build the services an
// update names (a service the tree refuses is refused alone, unless the
// update is Whole), install the changed ones into the kernel, serve the
// tree, export the metrics.

// built is a tree the builder made from an update, not yet installed.
type built struct {
	tree     *shared.Tree
	upserted []string
	removes  []string
	refused  map[string]error
	nodes    []shared.NodeSpec // where sources are (sourceNodes), for the tree's warnings
}

// update applies one update after the first; a rejected one is logged and
// counted, and the installed tree stays.
func (a *agent) update(u source.Update) error {
	if u.Err != nil {
		a.metrics.failed()
		a.log.Error("source state rejected; keeping the installed tree", "source", a.name, "err", u.Err)
		return u.Err
	}
	if u.LocalityChanged && u.Locality != nil {
		a.in.SetLocality(u.Locality)
		a.log.Info("node locality changed", "locality", u.Locality)
	}
	b, err := a.build(u, a.in.Generation()+1)
	if err == nil {
		err = a.installBuilt(u.Observed, b)
	}
	if err != nil {
		a.log.Error("update rejected; keeping the installed tree", "source", a.name, "changed", len(u.Changed), "err", err)
	}
	return err
}

// build makes the next generation of the tree from the last with the
// services u names: those the source has are added or replaced, the
// others removed. With u.Whole any error rejects the update; otherwise,
// when the tree refuses some services (a service invalid on its own, or
// one that takes a name, host, VIP or label value another service holds),
// the others are built, and each refused service keeps its last installed
// version (or stays out) and is tried again with every later update.
// Services refused only together, and errors other than the tree's
// refusal, reject the whole update.
func (a *agent) build(u source.Update, gen uint64) (built, error) {
	b := built{refused: map[string]error{}, nodes: a.sourceNodes(u)}
	names := u.Changed
	if !u.Whole {
		names = slices.Concat(names, slices.Collect(maps.Keys(a.refused))) // retried until accepted
		slices.Sort(names)
		names = slices.Compact(names)
	}
	for _, name := range names {
		switch {
		case u.Services.Has(name):
			b.upserted = append(b.upserted, name)
		case a.installed(name):
			b.removes = append(b.removes, name)
		default:
			delete(a.refused, name) // gone from the source, never installed
		}
	}
	tree, err := a.builder.UpdateEach(specsOf(u.Services, b.upserted), b.removes, gen)
	if !u.Whole && (errors.Is(err, shared.ErrInvalidTopology) || errors.Is(err, shared.ErrLabelCollision)) {
		tree, err = a.buildRefusing(u.Services, &b, gen)
	}
	if err != nil {
		a.metrics.failed()
		return b, wrapName(a.name, err)
	}
	b.tree = tree
	return b, nil
}

// buildRefusing builds b's services without those the tree refuses alone.
func (a *agent) buildRefusing(services source.Services, b *built, gen uint64) (*shared.Tree, error) {
	var good []string
	for _, name := range b.upserted {
		spec, err := services.Spec(name)
		if err == nil {
			err = a.builder.Check(spec)
		}
		if err != nil {
			b.refused[name] = err
		} else {
			good = append(good, name)
		}
	}
	if len(b.refused) > 0 {
		b.upserted = good
	}
	return a.builder.UpdateEach(specsOf(services, b.upserted), b.removes, gen)
}

// installed reports whether the builder's tree holds the service.
func (a *agent) installed(name string) bool {
	t := a.builder.Tree()
	if t == nil {
		return false
	}
	s, ok := t.Service(name)
	return ok && s.Name() == name
}

// specsOf yields the specs of the named services, one at a time: a source
// that keeps its services encoded decodes each when it is built.
func specsOf(services source.Services, names []string) func(func(*shared.ServiceSpec) error) error {
	return func(yield func(*shared.ServiceSpec) error) error {
		for _, name := range names {
			spec, err := services.Spec(name)
			if err == nil {
				err = yield(spec)
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
}

// installBuilt installs a tree the builder made, and commits it; on an
// error the builder reverts, and the previous tree stays. A change the
// source saw at observed (zero: none, as at start) is timed to the kernel.
func (a *agent) installBuilt(observed time.Time, b built) error {
	done := time.Now()
	if err := a.install(b.tree, slices.Concat(b.removes, b.upserted)); err != nil {
		a.builder.Revert()
		return err
	}
	a.builder.Commit()
	if !observed.IsZero() {
		a.metrics.updated(observed, done, time.Now())
	}
	a.noteRefused(b)
	a.noteWarnings(b.nodes)
	return nil
}

// install applies a tree whose changed services are named and serves it.
// Before the first install every service of the tree is written.
func (a *agent) install(tree *shared.Tree, changed []string) error {
	res, err := a.in.ApplyServices(tree, changed)
	if err != nil {
		a.metrics.failed()
		return wrapName(a.name, err)
	}
	a.tree = tree
	if a.ready.Load() {
		a.trees.Set(tree)
	}
	a.metrics.installed(tree, res)
	a.noteNotInKernel(res.Refused)
	a.log.Info("tree installed", "source", a.name, "generation", res.Generation, "services", res.Services,
		"eligible_endpoints", res.Endpoints, "rewritten", res.Rewritten, "removed", res.Removed, "not_in_kernel", len(res.Refused), "duration", res.Duration)
	return nil
}

// noteRefused records which services the tree refused in the update just
// installed, logging each new refusal (or new reason) and each service
// accepted again.
func (a *agent) noteRefused(b built) {
	if a.refused == nil {
		a.refused = map[string]error{}
	}
	for _, name := range slices.Concat(b.upserted, b.removes) {
		if _, was := a.refused[name]; was {
			delete(a.refused, name)
			a.log.Info("service accepted again", "service", name)
		}
	}
	for name, err := range b.refused {
		if prev, was := a.refused[name]; !was || prev.Error() != err.Error() {
			a.log.Error("service refused by the tree; the others are applied", "service", name,
				"keeps", map[bool]string{true: "its last installed version", false: "out of the tree"}[a.installed(name)], "err", err)
		}
		a.refused[name] = err
	}
	a.metrics.setRefused(len(a.refused))
}

// noteNotInKernel logs each service the kernel newly refuses (or refuses
// for a new reason) once, and each it installs again.
func (a *agent) noteNotInKernel(refused map[string]error) {
	for name := range a.notInKernel {
		if _, still := refused[name]; !still {
			delete(a.notInKernel, name)
			a.log.Info("service installed in the kernel again", "service", name)
		}
	}
	for name, err := range refused {
		if a.notInKernel[name] != err.Error() {
			a.log.Warn("service not installed in the kernel; the filters are served it", "service", name, "err", err)
			if a.notInKernel == nil {
				a.notInKernel = map[string]string{}
			}
			a.notInKernel[name] = err.Error()
		}
	}
}

func wrapName(name string, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}
