// Package demo is `loctree demo`: a small mesh on loopback where traffic
// from several source localities goes through both of loctree's data planes
// at once, the kernel path (the agent's eBPF programs on a cgroup of the
// demo's own) and the L7 path (the proxy-wasm filter in one proxy per
// source, its tree fetched from the agent), with the spread drawn live,
// then a zone failing over and coming back.
//
// Every address is in 127.0.0.0/8: backends on 127.0.77.0/24, the VIP in
// 127.77.0.0/16. Everything the demo mounts, creates, attaches and pins is
// removed when it ends or is interrupted, and what a demo killed with
// SIGKILL left is removed by the next one.
package demo

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/loctree/loctree/internal/pidstamp"
	"github.com/loctree/loctree/loader"
	"github.com/loctree/loctree/loader/kernel"
	"github.com/loctree/loctree/shared"
)

// Config configures Run.
type Config struct {
	Module   []byte        // the loctree filter (.wasm)
	Duration time.Duration // the whole run, split over the three phases
	// View, when set, receives the spread: redrawn in place every
	// RedrawEvery when Live (a terminal), else once at the end of each phase.
	View        io.Writer
	Live        bool
	RedrawEvery time.Duration
	// Interval is the pause between two rounds of traffic (one connection
	// and one request per source); 0 means 20ms.
	Interval time.Duration
	Log      *slog.Logger // agent and proxies; nil discards
	// Cache keeps the filter's compiled code; nil compiles it once per run
	// (seconds: most of the demo's start-up).
	Cache wazero.CompilationCache
}

// Summary is what the demo saw (`loctree demo -o json`).
type Summary struct {
	Service string        `json:"service"`
	VIP     string        `json:"vip"`
	Phases  []PhaseResult `json:"phases"`
	// Traffic is what both planes' cross-zone counters report at the end.
	Traffic     Traffic `json:"traffic"`
	Interrupted bool    `json:"interrupted,omitempty"`
}

// PhaseResult is one phase: a topology, and where each source's traffic
// went on each plane.
type PhaseResult struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Generation  uint64         `json:"generation"`
	Sources     []SourceResult `json:"sources"`
}

// SourceResult is one source locality in one phase.
type SourceResult struct {
	Source
	// Candidates are shared's candidate set for the source in this phase.
	Candidates []string `json:"candidates"`
	Kernel     Spread   `json:"kernel"`
	L7         Spread   `json:"l7"`
}

// Spread counts where one plane sent one source's traffic.
type Spread struct {
	Total      int            `json:"total"`
	Errors     int            `json:"errors"`
	LastError  string         `json:"last_error,omitempty"`
	Endpoints  map[string]int `json:"endpoints"`
	Localities map[string]int `json:"localities"`
	// Outside counts answers from endpoints outside the candidate set
	// (always 0 unless something is wrong).
	Outside int `json:"outside_candidates"`
}

func (s *Spread) add(addr string, err error, cands []string) {
	if err != nil {
		s.Errors++
		s.LastError = err.Error()
		return
	}
	s.Total++
	s.Endpoints[addr]++
	s.Localities[backendLocality(addr)]++
	for _, c := range cands {
		if c == addr {
			return
		}
	}
	s.Outside++
}

type phase struct {
	name, description string
	fail              bool
}

var phases = []phase{
	{"healthy", "every endpoint healthy", false},
	{"failover", "the endpoints of " + failZone + " marked unhealthy", true},
	{"restored", "the endpoints of " + failZone + " healthy again", false},
}

// demo is one run.
type demo struct {
	cfg      Config
	env      *env
	log      *slog.Logger
	agent    string // the agent's HTTP address
	agentRun *agentRun
	topo     string // the topology file the agent watches
	proxies  []*proxy
	client   *http.Client

	mu  sync.Mutex
	cur *PhaseResult
}

// Run sets the mesh up, runs the three phases and tears everything down.
// It returns what it saw; when ctx ends early the summary holds the phases
// so far and Interrupted.
func Run(ctx context.Context, cfg Config) (sum *Summary, err error) {
	if cfg.Interval <= 0 {
		cfg.Interval = 20 * time.Millisecond
	}
	if cfg.RedrawEvery <= 0 {
		cfg.RedrawEvery = 250 * time.Millisecond
	}
	d := &demo{cfg: cfg, log: cfg.Log, client: &http.Client{Timeout: 2 * time.Second}}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	if cfg.View != nil {
		fmt.Fprintf(cfg.View, "loctree demo: setting up %d backends, the agent and %d proxies on loopback...\n", len(backends), len(sources))
	}
	if d.env, err = setUp(); err != nil {
		return nil, err
	}
	d.reportSweep()
	defer func() {
		if err != nil && ctx.Err() != nil { // interrupted while setting up
			sum, err = &Summary{Service: ServiceName, VIP: VIP, Interrupted: true}, nil
		}
		if cerr := d.env.close(); err == nil && cerr != nil {
			err = fmt.Errorf("clean up: %w", cerr)
		}
	}()
	stopBackends, err := startBackends()
	if err != nil {
		return nil, err
	}
	d.env.undo = append(d.env.undo, func() error { stopBackends(); return nil })
	agent, err := d.startAgent(ctx)
	if err != nil {
		return nil, err
	}
	// The proxies compile the filter (seconds) while the agent loads its
	// programs; their first fetches may fail until it serves.
	if err := d.startProxies(ctx); err != nil {
		return nil, err
	}
	d.agentRun = agent
	if err := d.waitFor(ctx, agent, "the agent to install the tree", func() bool { return agentGeneration(d.client, d.agent) > 0 }); err != nil {
		return nil, err
	}
	return d.run(ctx)
}

// reportSweep says what setUp removed of killed demos, and what it could
// not (a warning: this demo uses names of its own).
func (d *demo) reportSweep() {
	if len(d.env.swept) > 0 {
		d.log.Info("removed what killed demos left", "pids", d.env.swept)
		if d.cfg.View != nil {
			fmt.Fprintf(d.cfg.View, "loctree demo: removed what killed demos (pids %v) left: mounts, cgroups, programs, pins\n", d.env.swept)
		}
	}
	if d.env.sweepErr != nil {
		d.log.Warn("could not remove all a killed demo left", "err", d.env.sweepErr)
		if d.cfg.View != nil {
			fmt.Fprintf(d.cfg.View, "loctree demo: warning: could not remove all a killed demo left: %v\n", d.env.sweepErr)
		}
	}
}

// startAgent writes the topology and starts the agent in this process
// until the demo ends; the undo stops it and uninstalls its programs and
// pins.
func (d *demo) startAgent(ctx context.Context) (*agentRun, error) {
	dir, err := os.MkdirTemp("", pidstamp.Prefix(stampDir, os.Getpid()))
	if err != nil {
		return nil, err
	}
	d.env.undo = append(d.env.undo, func() error { return os.RemoveAll(dir) })
	d.topo = filepath.Join(dir, "mesh.json")
	if err := os.WriteFile(d.topo, topologyJSON(false), 0o644); err != nil {
		return nil, err
	}
	if d.agent, err = freeAddr(); err != nil {
		return nil, err
	}
	cfg := loader.AgentConfig{
		Topology: d.topo, Locality: sources[0].Locality, CgroupLocality: map[string]shared.Locality{},
		Cgroup: d.env.attach, BPFFS: filepath.Join(d.env.bpffsMount, "loctree"), Listen: d.agent,
		Capacity: kernel.DefaultCapacity(), Watch: 50 * time.Millisecond, Logger: d.log.With("component", "agent"),
	}
	for _, s := range sources {
		cfg.CgroupLocality[d.env.sourceCg[s.Name]] = s.Locality
	}
	actx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	run := &agentRun{stopped: make(chan struct{})}
	go func() { run.err = loader.Run(actx, cfg); close(run.stopped) }()
	d.env.undo = append(d.env.undo, func() error {
		cancel()
		<-run.stopped
		if err := kernel.Uninstall(cfg.Cgroup, cfg.BPFFS); err != nil {
			return err
		}
		return run.err
	})
	return run, nil
}

// agentRun is the agent running in this process; err is set once stopped
// is closed.
type agentRun struct {
	stopped chan struct{}
	err     error
}

// startProxies starts one proxy per source, compiling the filter once.
func (d *demo) startProxies(ctx context.Context) error {
	cache := d.cfg.Cache
	if cache == nil {
		cache = wazero.NewCompilationCache()
		d.env.undo = append(d.env.undo, func() error { return cache.Close(context.Background()) })
	}
	for _, s := range sources {
		p, err := startProxy(ctx, d.cfg.Module, cache, s, d.agent, d.log)
		if err != nil {
			return err
		}
		d.proxies = append(d.proxies, p)
		d.env.undo = append(d.env.undo, func() error { p.close(); return nil })
	}
	return nil
}

// waitFor polls ok every 20ms for up to 20s, and fails at once if the
// agent stops.
func (d *demo) waitFor(ctx context.Context, agent *agentRun, what string, ok func() bool) error {
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		select {
		case <-agent.stopped:
			return fmt.Errorf("waiting for %s: the agent stopped: %w", what, agent.err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waiting for %s: still not there after 20s", what)
		}
	}
	return nil
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
