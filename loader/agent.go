package loader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loctree/loctree/bpf"
	"github.com/loctree/loctree/internal/topology"
	"github.com/loctree/loctree/loader/kernel"
	"github.com/loctree/loctree/loader/source"
	"github.com/loctree/loctree/shared"
)

// AgentConfig configures Run.
type AgentConfig struct {
	Topology string          // topology file; "" uses the embedded example mesh
	Locality shared.Locality // this node's locality
	// CgroupLocality gives cgroups (directories below Cgroup) their own
	// source locality instead of the node's.
	CgroupLocality map[string]shared.Locality
	Cgroup         string // cgroup v2 directory the programs attach to
	BPFFS          string // bpffs directory for pins; "" pins nothing
	Listen         string // address of /healthz, /metrics and /v1/tree; "" serves nothing
	Once           bool   // install, attach and return
	Capacity       kernel.Capacity
	Watch          time.Duration // how often the topology file is checked (default 1s)
	// Source, when set, replaces the topology file: its updates are installed
	// and its own-node locality replaces Locality once known.
	Source source.Source
	Logger *slog.Logger

	beforeAttach func() // tests: runs after the first install, before the programs attach
}

// agent is one running agent: the installer and what it serves.
type agent struct {
	cfg        AgentConfig
	log        *slog.Logger
	in         *kernel.Installer
	trees      TreeServer
	metrics    *Metrics
	ready      atomic.Bool    // the programs are attached: the kernel path is live
	pinsOK     atomic.Bool    // every pin is in the bpffs directory (pins.go)
	background sync.WaitGroup // goroutines that use the installer
	tree       *shared.Tree   // the tree installed last
	builder    shared.Builder // makes the next tree from the last per service
	files      *topology.Files
	first      *topology.Change // the first change, committed once installed
	built      <-chan error     // the first tree is built (buildFirst)
	resync     bool             // a source update was rejected: rebuild from its next whole state
	refused    map[string]error // a source's services the tree refused, each keeping its last installed version
}

// Run is `loctree agent`: it re-adopts or creates the pinned maps, installs
// the topology's tree, attaches the programs to the cgroup, then serves
// HTTP and applies every change of the topology file until ctx is done. A
// topology that cannot be installed at start is an error; later, a bad
// topology is logged and the installed tree is kept. On return the pinned
// programs and maps stay in place.
func Run(ctx context.Context, cfg AgentConfig) error {
	a := &agent{cfg: cfg, log: cfg.Logger, metrics: newMetrics()}
	a.pinsOK.Store(true)
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if cfg.Watch <= 0 {
		a.cfg.Watch = time.Second
	}
	fresh := cfg.BPFFS != "" && !pinned(cfg.BPFFS)
	if cfg.Source == nil {
		a.built = a.buildFirst()
	}
	in, err := kernel.Open(kernel.Config{BPFFS: cfg.BPFFS, Capacity: cfg.Capacity, Locality: cfg.Locality, Logger: a.log, Replace: true})
	if err != nil {
		if fresh {
			kernel.Uninstall("", cfg.BPFFS)
		}
		return err
	}
	a.in = in
	a.metrics.kernel = in.Stats
	a.metrics.picks = in.PriorityPicks
	if err := a.startAndServe(ctx); err != nil {
		in.Close()
		if fresh { // leave the node as it was: no pins from a failed first start
			kernel.Uninstall("", cfg.BPFFS)
		}
		return err
	}
	return in.Close()
}

// startAndServe installs and attaches, then serves and watches until ctx is
// done (or returns at once with --once).
func (a *agent) startAndServe(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer a.background.Wait() // after cancel: nothing runs when Run closes the installer
	defer cancel()
	stop, err := a.serve()
	if err != nil {
		return err
	}
	defer stop()
	if a.cfg.Source != nil {
		return a.runSource(ctx)
	}
	if err := a.start(); err != nil {
		return err
	}
	if a.cfg.Once {
		return nil
	}
	a.guardPinsFrom(ctx)
	a.watch(ctx)
	return nil
}

// pinned reports whether an earlier agent left maps in dir.
func pinned(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, bpf.MapFrontends))
	return err == nil
}

// start installs the first tree and attaches the programs.
func (a *agent) start() error {
	if a.built == nil {
		a.built = a.buildFirst()
	}
	if err := <-a.built; err != nil {
		return err
	}
	tree, err := a.builder.Stamp(a.in.Generation() + 1)
	if err == nil {
		err = a.install(a.topologyName(), tree, nil)
	}
	if err != nil {
		return err
	}
	if a.first != nil {
		a.first.Commit()
		a.first = nil // it holds the file's content
	}
	return a.attach()
}

// buildFirst reads the topology and builds its first tree (its generation
// is stamped once the installer knows the last one) on a goroutine of its
// own, so that it runs while Open loads the programs: the BPF verifier
// takes most of an agent's start.
func (a *agent) buildFirst() <-chan error {
	done := make(chan error, 1)
	go func() {
		if a.cfg.Topology == "" {
			_, err := a.builder.Update(topology.Default().Services, nil, 0)
			done <- wrapName(topology.DefaultName, err)
			return
		}
		a.files = topology.NewFiles(a.cfg.Topology)
		ch, err := a.files.Poll()
		if err != nil {
			done <- err
			return
		}
		a.first = ch
		_, err = a.builder.UpdateEach(ch.Each, ch.Removes, 0)
		done <- wrapName(a.cfg.Topology, err)
	}()
	return done
}

func wrapName(name string, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

func (a *agent) topologyName() string {
	if a.cfg.Topology == "" {
		return topology.DefaultName
	}
	return a.cfg.Topology
}

// attach sets the cgroup localities, attaches the programs and reports ready.
func (a *agent) attach() error {
	for dir, loc := range a.cfg.CgroupLocality {
		if err := a.in.SetCgroupLocality(dir, loc); err != nil {
			return fmt.Errorf("--cgroup-locality %s: %w", dir, err)
		}
	}
	if a.cfg.beforeAttach != nil {
		a.cfg.beforeAttach()
	}
	if err := a.in.Attach(a.cfg.Cgroup); err != nil {
		return err
	}
	// Ready means redirected: /healthz and /v1/tree answer only now, so a
	// client that waits for either finds the kernel path live.
	a.ready.Store(true)
	a.trees.Set(a.tree)
	a.log.Info("agent ready", "cgroup", a.cfg.Cgroup, "bpffs", a.cfg.BPFFS, "listen", a.listenLog())
	return nil
}

// apply builds the next generation of the tree from the previous one with
// the services each yields added or replaced (upserted names them) and the
// removes removed, and installs what changed. A tree that cannot be built
// or installed is an error, and the previous one stays, in the builder as
// in the kernel. A change the source saw at observed (zero: none, as at
// start) is timed to the kernel.
func (a *agent) apply(name string, observed time.Time, each func(func(*shared.ServiceSpec) error) error, upserted, removes []string) error {
	tree, err := a.builder.UpdateEach(each, removes, a.in.Generation()+1)
	if err != nil {
		a.metrics.failed()
		return fmt.Errorf("%s: %w", name, err)
	}
	return a.installBuilt(name, observed, tree, upserted, removes)
}

// installBuilt installs the tree the builder's last Update made, and
// commits it; on an error the builder reverts, and the previous tree stays.
func (a *agent) installBuilt(name string, observed time.Time, tree *shared.Tree, upserted, removes []string) error {
	built := time.Now()
	if err := a.install(name, tree, append(slices.Clone(removes), upserted...)); err != nil {
		a.builder.Revert()
		return err
	}
	a.builder.Commit()
	if !observed.IsZero() {
		a.metrics.updated(observed, built, time.Now())
	}
	return nil
}

// install applies a tree whose changed services are named (nil: the first
// tree, all of them) and serves it.
func (a *agent) install(name string, tree *shared.Tree, changed []string) error {
	res, err := a.in.ApplyServices(tree, changed)
	if err != nil {
		a.metrics.failed()
		return fmt.Errorf("%s: %w", name, err)
	}
	a.tree = tree
	if a.ready.Load() {
		a.trees.Set(tree)
	}
	a.metrics.installed(res)
	a.log.Info("tree installed", "topology", name, "generation", res.Generation, "services", res.Services,
		"endpoints", res.Endpoints, "rewritten", res.Rewritten, "removed", res.Removed, "duration", res.Duration)
	return nil
}

// specs yields the services of a slice.
func specs(upserts []shared.ServiceSpec) func(func(*shared.ServiceSpec) error) error {
	return func(yield func(*shared.ServiceSpec) error) error {
		for i := range upserts {
			if err := yield(&upserts[i]); err != nil {
				return err
			}
		}
		return nil
	}
}

// applyChange applies a change of the topology files and commits it.
func (a *agent) applyChange(ch *topology.Change, observed time.Time) error {
	if err := a.apply(a.cfg.Topology, observed, ch.Each, ch.Names, ch.Removes); err != nil {
		return err
	}
	ch.Commit()
	return nil
}

// watch polls the topology file and applies it when its content changes.
func (a *agent) watch(ctx context.Context) {
	if a.cfg.Topology == "" {
		<-ctx.Done()
		return
	}
	every(ctx, a.cfg.Watch, a.reload)
}

// every runs f every d until ctx is done.
func every(ctx context.Context, d time.Duration, f func()) {
	tick := time.NewTicker(d)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			f()
		}
	}
}

// reload applies what changed in the topology files since the last good
// state; a bad file is logged once and the installed tree stays.
func (a *agent) reload() {
	observed := time.Now() // the poll that finds the files changed
	ch, err := a.files.Poll()
	switch {
	case errors.Is(err, os.ErrNotExist):
		return
	case err != nil:
		a.metrics.failed()
	case ch == nil:
		return
	default:
		err = a.applyChange(ch, observed)
	}
	if err != nil {
		a.log.Error("topology rejected; keeping the installed tree", "err", err)
	}
}
