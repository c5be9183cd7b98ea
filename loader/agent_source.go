package loader

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/loctree/loctree/loader/source"
	"github.com/loctree/loctree/shared"
)

// errSourceEnded means a source's Run returned before its first update.
var errSourceEnded = errors.New("the source ended before its first update")

// runSource is startAndServe's loop for a source.Source (Kubernetes, ...)
// instead of a topology file: the first update is installed and the
// programs attached (an error there is Run's error); every later update is
// applied, a bad one logged while the installed tree stays. A change of the
// node's own locality re-derives every service's source labels.
func (a *agent) runSource(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel: the source has stopped when Run returns
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	updates := make(chan source.Update)
	done := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		done <- a.cfg.Source.Run(ctx, func(u source.Update) {
			select {
			case updates <- u:
			case <-ctx.Done():
			}
		})
	}()
	first, err := a.firstUpdate(ctx, updates, done)
	if err != nil {
		return err
	}
	if err := a.startWith(first); err != nil || a.cfg.Once {
		return err
	}
	a.guardPinsFrom(ctx)
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-done:
			return err
		case u := <-updates:
			a.update(u)
		}
	}
}

func (a *agent) firstUpdate(ctx context.Context, updates chan source.Update, done chan error) (source.Update, error) {
	select {
	case u := <-updates:
		return u, nil
	case err := <-done:
		if err == nil {
			err = errSourceEnded
		}
		return source.Update{}, err
	case <-ctx.Done():
		return source.Update{}, ctx.Err()
	}
}

// startWith is start for a source's first update.
func (a *agent) startWith(u source.Update) error {
	if u.Locality != nil {
		a.in.SetLocality(u.Locality)
	}
	u.Observed = time.Time{} // the start, not a change: not live until attached
	if err := a.applyUpdate(u, true); err != nil {
		return err
	}
	return a.attach()
}

func (a *agent) update(u source.Update) {
	if u.LocalityChanged && u.Locality != nil {
		a.in.SetLocality(u.Locality)
		a.log.Info("node locality changed", "locality", u.Locality)
	}
	if err := a.applyUpdate(u, a.resync); err != nil {
		a.resync = true
		a.log.Error("update rejected; keeping the installed tree", "changed", u.Changed, "err", err)
		return
	}
	a.resync = false
}

// applyUpdate builds only the services an update names as changed, or,
// with all, every service of its topology (the first update, and the one
// after a rejected update, whose changes the builder never took).
func (a *agent) applyUpdate(u source.Update, all bool) error {
	have := func(name string) bool {
		t := a.builder.Tree()
		if t == nil {
			return false
		}
		s, ok := t.Service(name)
		return ok && s.Name == name
	}
	var upserts []shared.ServiceSpec
	var removes []string
	in := func(name string) (*shared.ServiceSpec, bool) {
		i, ok := slices.BinarySearchFunc(u.Topology.Services, name, func(s shared.ServiceSpec, n string) int { return cmp.Compare(s.Name, n) })
		if !ok {
			return nil, false
		}
		return &u.Topology.Services[i], true
	}
	names := u.Changed
	if all {
		names = nil
		for _, s := range u.Topology.Services {
			names = append(names, s.Name)
		}
		if t := a.builder.Tree(); t != nil {
			for _, s := range t.Services() {
				names = append(names, s.Name)
			}
		}
	}
	names = append(slices.Clone(names), slices.Collect(maps.Keys(a.refused))...) // retried until accepted
	slices.Sort(names)
	names = slices.Compact(names)
	for _, name := range names {
		if s, ok := in(name); ok {
			upserts = append(upserts, *s)
		} else if have(name) {
			removes = append(removes, name)
		} else {
			delete(a.refused, name) // gone from the source, never installed
		}
	}
	return a.applySource(u.Observed, upserts, removes)
}

// applySource applies a source's services. When the tree refuses some of
// them (a service invalid on its own, or one that takes a name, host, VIP
// or label value another service holds), it applies the others, and each
// refused service keeps its last installed version (or stays out), is
// logged, and is tried again with every later update: one bad object in a
// Kubernetes cluster does not hold back every other service's changes, nor
// keep the agent from starting. Services refused only together, and
// errors other than the tree's refusal, reject the whole update as before.
func (a *agent) applySource(observed time.Time, upserts []shared.ServiceSpec, removes []string) error {
	gen := a.in.Generation() + 1
	tree, err := a.builder.UpdateEach(specs(upserts), removes, gen)
	refused := map[string]error{}
	if errors.Is(err, shared.ErrInvalidTopology) || errors.Is(err, shared.ErrLabelCollision) {
		var good []shared.ServiceSpec
		for i := range upserts {
			if cerr := a.builder.Check(&upserts[i]); cerr != nil {
				refused[upserts[i].Name] = cerr
			} else {
				good = append(good, upserts[i])
			}
		}
		if len(refused) > 0 {
			upserts = good
			tree, err = a.builder.UpdateEach(specs(upserts), removes, gen)
		}
	}
	if err != nil {
		a.metrics.failed()
		return fmt.Errorf("source: %w", err)
	}
	upserted := make([]string, len(upserts))
	for i := range upserts {
		upserted[i] = upserts[i].Name
	}
	if err := a.installBuilt("source", observed, tree, upserted, removes); err != nil {
		return err
	}
	a.noteRefused(upserted, removes, refused)
	return nil
}

// noteRefused records which services the tree refused in the update just
// installed, logging each new refusal (or new reason) and each service
// accepted again.
func (a *agent) noteRefused(accepted, removed []string, refused map[string]error) {
	if a.refused == nil {
		a.refused = map[string]error{}
	}
	for _, name := range slices.Concat(accepted, removed) {
		if _, was := a.refused[name]; was {
			delete(a.refused, name)
			a.log.Info("service accepted again", "service", name)
		}
	}
	for name, err := range refused {
		if prev, was := a.refused[name]; !was || prev.Error() != err.Error() {
			s, ok := a.tree.Service(name)
			installed := ok && s.Name == name
			a.log.Error("service refused by the tree; the others are applied", "service", name,
				"keeps", map[bool]string{true: "its last installed version", false: "out of the tree"}[installed], "err", err)
		}
		a.refused[name] = err
	}
	a.metrics.setRefused(len(a.refused))
}
