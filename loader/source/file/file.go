// Package file is the agent's topology-file source: a topology file, or a
// directory of them (docs/TOPOLOGY.md), polled for changes; or, with no
// path, the embedded example mesh.
//
// A change is published whole (source.Update.Whole): a bad file changes
// nothing, and the next change is computed against the last state the
// agent applied, not against the rejected one. A file that cannot be read
// or decoded is published as an error once, until the files change again.
package file

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/loctree/loctree/internal/ticker"
	"github.com/loctree/loctree/internal/topology"
	"github.com/loctree/loctree/loader/source"
	"github.com/loctree/loctree/shared"
)

// Config configures a Source.
type Config struct {
	Path     string        // a topology file or directory; "" is the embedded example mesh
	Interval time.Duration // how often the files are checked (default 1s)
}

// Source follows a topology file or directory (topology.Files: a file is
// read only when its size, times or inode changed, and only the services
// whose bytes changed are decoded, one at a time, when the agent builds
// them).
type Source struct{ cfg Config }

// New returns the source of cfg.
func New(cfg Config) *Source {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	return &Source{cfg: cfg}
}

// Run publishes the files' state, then each change found by a poll every
// Interval, until ctx ends. A first state that cannot be read, or that the
// agent rejects, is Run's error: the agent cannot start from it.
func (s *Source) Run(ctx context.Context, publish func(source.Update) error) error {
	if s.cfg.Path == "" {
		return embedded(ctx, publish)
	}
	files := topology.NewFiles(s.cfg.Path)
	ch, err := files.Poll()
	if err == nil {
		err = publish(update(ch, time.Time{}))
	}
	if err != nil {
		return ignoreEnd(ctx, err)
	}
	ch.Commit()
	ticker.Every(ctx, s.cfg.Interval, func() { poll(files, publish) })
	return nil
}

// poll publishes what changed since the last state the agent applied, or
// the error that keeps it from being read.
func poll(files *topology.Files, publish func(source.Update) error) {
	observed := time.Now() // the poll that finds the files changed
	ch, err := files.Poll()
	switch {
	case err != nil:
		publish(source.Update{Err: err})
	case ch != nil:
		if publish(update(ch, observed)) == nil {
			ch.Commit()
		}
	}
}

func update(ch *topology.Change, observed time.Time) source.Update {
	return source.Update{Changed: ch.Changed(), Services: ch, Nodes: ch.Nodes, Whole: true, Observed: observed}
}

// embedded publishes the example mesh once and waits for ctx.
func embedded(ctx context.Context, publish func(source.Update) error) error {
	top := topology.Default()
	slices.SortFunc(top.Services, func(a, b shared.ServiceSpec) int { return cmp.Compare(a.Name, b.Name) })
	var names []string
	for _, s := range top.Services {
		names = append(names, s.Name)
	}
	err := publish(source.Update{Changed: names, Services: source.TopologyServices(top), Topology: top, Nodes: top.Nodes, Whole: true})
	if err != nil {
		return ignoreEnd(ctx, err)
	}
	<-ctx.Done()
	return nil
}

// ignoreEnd is err, or nil once ctx has ended (the agent stopped).
func ignoreEnd(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}
