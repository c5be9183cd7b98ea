package loader

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loctree/loctree/bpf"
	"github.com/loctree/loctree/internal/topology"
	"github.com/loctree/loctree/loader/kernel"
	"github.com/loctree/loctree/loader/source"
	"github.com/loctree/loctree/loader/source/file"
	"github.com/loctree/loctree/shared"
)

// AgentConfig configures Run.
type AgentConfig struct {
	// Source is where the endpoints come from. Nil is the topology file (or
	// directory) Topology, polled every Watch: the embedded example mesh
	// when Topology is "".
	Source   source.Source
	Topology string
	Locality shared.Locality // this node's locality, until the source knows it
	// CgroupLocality gives cgroups (directories below Cgroup) their own
	// source locality instead of the node's.
	CgroupLocality map[string]shared.Locality
	Cgroup         string // cgroup v2 directory the programs attach to
	BPFFS          string // bpffs directory for pins; "" pins nothing
	Listen         string // address of /healthz, /metrics and /v1/tree; "" serves nothing
	Once           bool   // install, attach and return
	Capacity       kernel.Capacity
	// TrafficScope is the scope key /metrics reports the traffic matrix
	// by (loctree_traffic_*); "" is DefaultTrafficScope, zone.
	TrafficScope string
	Watch        time.Duration // how often the topology file and the pins are checked (default 1s)
	Logger       *slog.Logger

	beforeAttach func() // tests: runs after the first install, before the programs attach
}

// agent is one running agent: the installer and what it serves.
type agent struct {
	cfg         AgentConfig
	name        string // what the logs call the source
	log         *slog.Logger
	in          *kernel.Installer
	trees       TreeServer
	metrics     *Metrics
	ready       atomic.Bool       // the programs are attached: the kernel path is live
	pinsOK      atomic.Bool       // every pin is in the bpffs directory (agent_pins.go)
	background  sync.WaitGroup    // goroutines that use the installer
	tree        *shared.Tree      // the tree installed last
	builder     shared.Builder    // makes the next tree from the last per service
	refused     map[string]error  // a source's services the tree refused, each keeping its last installed version
	warned      map[string]bool   // the installed tree's warnings (shared.Warning.String), each logged once
	notInKernel map[string]string // services of the installed tree the kernel does not install, with why (kernel.Refusal), each logged once
}

// Run is `loctree agent`: it starts the source, re-adopts or creates the
// pinned maps while the source's first state is built, installs that
// state's tree, attaches the programs to the cgroup, then serves HTTP and
// applies every update of the source until ctx is done. A first state
// that cannot be installed is an error; later, a rejected update is logged
// and the installed tree is kept. On return the pinned programs and maps
// stay in place.
func Run(ctx context.Context, cfg AgentConfig) error {
	a := newAgent(cfg)
	fresh := cfg.BPFFS != "" && !pinned(cfg.BPFFS)
	ctx, cancel := context.WithCancel(ctx)
	src := a.startSource(ctx)
	defer src.stop(cancel) // the source has stopped when Run returns
	first := a.buildFirst(ctx, src)
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
	a.metrics.traffic = in.Traffic
	a.metrics.forgetTraffic = in.ForgetTraffic
	if err := a.startAndServe(ctx, src, first); err != nil {
		in.Close()
		if fresh { // leave the node as it was: no pins from a failed first start
			kernel.Uninstall("", cfg.BPFFS)
		}
		return err
	}
	return in.Close()
}

func newAgent(cfg AgentConfig) *agent {
	a := &agent{cfg: cfg, log: cfg.Logger, metrics: newMetrics(cfg.TrafficScope), name: "source"}
	a.pinsOK.Store(true)
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if a.cfg.Watch <= 0 {
		a.cfg.Watch = time.Second
	}
	if a.cfg.Source == nil {
		a.cfg.Source = file.New(file.Config{Path: cfg.Topology, Interval: a.cfg.Watch})
		a.name = cfg.Topology
		if a.name == "" {
			a.name = topology.DefaultName
		}
	}
	if h, ok := a.cfg.Source.(source.Health); ok {
		a.metrics.source = h.Health
	}
	if m, ok := a.cfg.Source.(source.Metrics); ok {
		a.metrics.extra = m.WriteMetrics
	}
	return a
}

// startAndServe installs the first tree and attaches, then serves and
// applies the source's updates until ctx is done (or returns at once with
// --once).
func (a *agent) startAndServe(ctx context.Context, src *running, first <-chan firstBuild) error {
	defer a.background.Wait() // after the source stopped: nothing runs when Run closes the installer
	stop, err := a.serve()
	if err != nil {
		return err
	}
	defer stop()
	if err := a.start(ctx, first); err != nil || a.cfg.Once {
		return err
	}
	a.guardPinsFrom(ctx)
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-src.done:
			return err
		case p := <-src.updates:
			p.reply <- a.update(p.Update)
		}
	}
}

// pinned reports whether an earlier agent left maps in dir.
func pinned(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, bpf.MapFrontends))
	return err == nil
}

// running is a source's Run on its own goroutine: its updates, each
// answered on its reply channel once applied or rejected, and its end.
type running struct {
	updates chan published
	done    chan error
	wg      sync.WaitGroup
}

type published struct {
	source.Update
	reply chan error
}

// errSourceEnded means a source's Run returned before its first update.
var errSourceEnded = errors.New("the source ended before its first update")

func (a *agent) startSource(ctx context.Context) *running {
	r := &running{updates: make(chan published), done: make(chan error, 1)}
	publish := func(u source.Update) error {
		p := published{u, make(chan error, 1)}
		select {
		case r.updates <- p:
		case <-ctx.Done():
			return ctx.Err()
		}
		select {
		case err := <-p.reply:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	r.wg.Go(func() { r.done <- a.cfg.Source.Run(ctx, publish) })
	return r
}

// stop ends the source's Run by cancelling its context, and waits for it.
func (r *running) stop(cancel context.CancelFunc) {
	cancel()
	r.wg.Wait()
}

// firstBuild is the source's first update built into a tree whose
// generation is not stamped yet.
type firstBuild struct {
	p   published
	b   built
	err error
}

// buildFirst waits for the source's first update and builds it on a
// goroutine of its own, so that it runs while kernel.Open loads the
// programs: the BPF verifier takes most of an agent's start.
func (a *agent) buildFirst(ctx context.Context, src *running) <-chan firstBuild {
	out := make(chan firstBuild, 1)
	go func() {
		var f firstBuild
		select {
		case f.p = <-src.updates:
			if f.err = f.p.Err; f.err == nil {
				f.b, f.err = a.build(f.p.Update, 0)
			}
		case f.err = <-src.done:
			if f.err == nil {
				f.err = errSourceEnded
			}
		case <-ctx.Done():
			f.err = ctx.Err()
		}
		out <- f
	}()
	return out
}

// start installs the first tree and attaches the programs; the source's
// first update is answered with the outcome.
func (a *agent) start(ctx context.Context, first <-chan firstBuild) error {
	var f firstBuild
	select {
	case f = <-first:
	case <-ctx.Done():
		return ctx.Err()
	}
	err := f.err
	if err == nil {
		err = a.startWith(f.p.Update, f.b)
	}
	if f.p.reply != nil {
		f.p.reply <- err
	}
	return err
}

func (a *agent) startWith(u source.Update, b built) error {
	if u.Locality != nil {
		a.in.SetLocality(u.Locality)
	}
	tree, err := a.builder.Stamp(a.in.Generation() + 1)
	if err != nil {
		a.builder.Revert()
		return wrapName(a.name, err)
	}
	b.tree = tree
	if err := a.installBuilt(time.Time{}, b); err != nil { // the start, not a change: not live until attached
		return err
	}
	return a.attach()
}

// attach sets the cgroup localities, attaches the programs and reports ready.
func (a *agent) attach() error {
	for dir, loc := range a.cfg.CgroupLocality {
		if err := a.in.SetCgroupLocality(dir, loc); err != nil {
			return wrapName("--cgroup-locality "+dir, err)
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
