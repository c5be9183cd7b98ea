package loader

import (
	"context"
	"errors"
	"sync"

	"github.com/loctree/loctree/loader/source"
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
	if err := a.apply(u.Topology, "source"); err != nil {
		return err
	}
	return a.attach()
}

func (a *agent) update(u source.Update) {
	if u.LocalityChanged && u.Locality != nil {
		a.in.SetLocality(u.Locality)
		a.log.Info("node locality changed", "locality", u.Locality)
	}
	if err := a.apply(u.Topology, "source"); err != nil {
		a.log.Error("update rejected; keeping the installed tree", "changed", u.Changed, "err", err)
	}
}
