package loader

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loctree/loctree/bpf"
	"github.com/loctree/loctree/internal/topology"
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
	Capacity       Capacity
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
	in         *Installer
	trees      TreeServer
	metrics    *Metrics
	ready      atomic.Bool    // the programs are attached: the kernel path is live
	pinsOK     atomic.Bool    // every pin is in the bpffs directory (pins.go)
	background sync.WaitGroup // goroutines that use the installer
	tree       *shared.Tree   // the tree installed last
	last       []byte         // the topology file's content last applied (or rejected)
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
	in, err := Open(Config{BPFFS: cfg.BPFFS, Capacity: cfg.Capacity, Locality: cfg.Locality, Logger: a.log})
	if err != nil {
		if fresh {
			Uninstall("", cfg.BPFFS)
		}
		return err
	}
	a.in = in
	a.metrics.kernel = in.k.stats
	if err := a.startAndServe(ctx); err != nil {
		in.Close()
		if fresh { // leave the node as it was: no pins from a failed first start
			Uninstall("", cfg.BPFFS)
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
	top, name, err := a.read()
	if err != nil {
		return err
	}
	if err := a.apply(top, name); err != nil {
		return err
	}
	return a.attach()
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

// read loads the topology file (or the embedded default).
func (a *agent) read() (*shared.Topology, string, error) {
	if a.cfg.Topology == "" {
		return topology.Default(), topology.DefaultName, nil
	}
	data, err := topology.ReadFile(a.cfg.Topology)
	if err != nil {
		return nil, a.cfg.Topology, err
	}
	a.last = data
	top, err := topology.Parse(data, a.cfg.Topology)
	return top, a.cfg.Topology, err
}

// apply builds and installs a topology as the next generation.
func (a *agent) apply(top *shared.Topology, name string) error {
	tree, err := shared.Build(top, shared.BuildOptions{Generation: a.in.Generation() + 1})
	if err != nil {
		a.metrics.failed()
		return fmt.Errorf("%s: %w", name, err)
	}
	res, err := a.in.Apply(tree)
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

// watch polls the topology file and applies it when its content changes.
func (a *agent) watch(ctx context.Context) {
	if a.cfg.Topology == "" {
		<-ctx.Done()
		return
	}
	tick := time.NewTicker(a.cfg.Watch)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			a.reload()
		}
	}
}

func (a *agent) reload() {
	data, err := topology.ReadFile(a.cfg.Topology)
	if err != nil || bytes.Equal(data, a.last) {
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			a.log.Warn("cannot read topology; keeping the installed tree", "topology", a.cfg.Topology, "err", err)
		}
		return
	}
	a.last = data
	top, err := topology.Parse(data, a.cfg.Topology)
	if err == nil {
		err = a.apply(top, a.cfg.Topology)
	} else {
		a.metrics.failed()
	}
	if err != nil {
		a.log.Error("topology rejected; keeping the installed tree", "err", err)
	}
}
