package xds

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/loctree/loctree/loader/source"
	"github.com/loctree/loctree/shared"
)

// Source implements source.Source, source.Health and source.Metrics.
var (
	_ source.Source  = (*Source)(nil)
	_ source.Health  = (*Source)(nil)
	_ source.Metrics = (*Source)(nil)
)

// ErrConfig is returned by New for a configuration it cannot run with.
var ErrConfig = errors.New("xds source configuration")

// Config configures a Source. NodeName, Namespace, PodName, InstanceIP and
// ClusterID make the xDS Node istiod knows the agent by (Config.node).
type Config struct {
	// Address is istiod's xDS address, host:port (15010 plaintext,
	// 15012 TLS with a token).
	Address string
	// TLS, when set, makes the connection TLS (TLSConfig); nil: plaintext.
	TLS *tls.Config
	// TokenFile, when set, is sent as a bearer token on every stream
	// (istiod's 15012 authenticates a Kubernetes service-account token).
	TokenFile string
	// NodeName is the node the agent runs on: its locality is that of the
	// workloads istiod places on it.
	NodeName string
	// Namespace and PodName are the agent's pod (the downward API);
	// InstanceIP its IP (default 1.1.1.1, ztunnel's DEFAULT_IP).
	Namespace, PodName, InstanceIP string
	// ClusterID is the agent's cluster (default Kubernetes, istiod's
	// and ztunnel's default).
	ClusterID string
	// InitialBackoff and MaxBackoff bound the wait between connection
	// attempts (default DefaultInitialBackoff, DefaultMaxBackoff).
	InitialBackoff, MaxBackoff time.Duration
	// KeepaliveTime and KeepaliveTimeout: after KeepaliveTime without a
	// frame from istiod the client pings, and a ping unanswered for
	// KeepaliveTimeout ends the connection, which the client then makes
	// again (default DefaultKeepaliveTime, DefaultKeepaliveTimeout). Without
	// them a connection a network silences (no FIN, no RST) would leave the
	// agent on its last state until TCP gave up, minutes to hours later.
	// istiod sends GOAWAY to a client that pings more often than every 15 s
	// (half its own 30 s keepalive, pilot/pkg/grpc/grpc.go); gRPC pings no
	// more often than every 10 s.
	KeepaliveTime, KeepaliveTimeout time.Duration
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// Source follows istiod's workload discovery and publishes topologies.
type Source struct {
	cfg    Config
	st     *store
	stats  stats
	client *client

	// owned by Run's goroutine
	specs    map[string][]shared.ServiceSpec // WDS service key → its tree services
	byName   map[string]*shared.ServiceSpec  // tree service name → spec
	refused  map[string]string               // WDS service key → why the tree cannot hold it
	locality shared.Locality
	network  string
	started  bool
	rejected map[string]bool // names of updates the agent rejected: named again
}

// New checks the configuration; Run connects.
func New(cfg Config) (*Source, error) {
	if cfg.Address == "" || cfg.NodeName == "" {
		return nil, fmt.Errorf("%w: an address and a node name are required", ErrConfig)
	}
	cfg.InstanceIP = orDefault(cfg.InstanceIP, "1.1.1.1")
	cfg.ClusterID = orDefault(cfg.ClusterID, "Kubernetes")
	cfg.InitialBackoff = orDefault(cfg.InitialBackoff, DefaultInitialBackoff)
	cfg.MaxBackoff = orDefault(cfg.MaxBackoff, DefaultMaxBackoff)
	cfg.KeepaliveTime = orDefault(cfg.KeepaliveTime, DefaultKeepaliveTime)
	cfg.KeepaliveTimeout = orDefault(cfg.KeepaliveTimeout, DefaultKeepaliveTimeout)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Source{cfg: cfg, st: newStore(), specs: map[string][]shared.ServiceSpec{},
		byName: map[string]*shared.ServiceSpec{}, refused: map[string]string{}, rejected: map[string]bool{}}
	s.client = &client{cfg: &s.cfg, st: s.st, stats: &s.stats, versions: map[string]string{}}
	return s, nil
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Health is nil while the ADS stream is up, else why not (the agent then
// serves its last tree).
func (s *Source) Health() error { return s.stats.health(s.cfg.Address) }

// WriteMetrics writes the xDS client's metrics (stats.write).
func (s *Source) WriteMetrics(w io.Writer) error {
	wl, svc := s.st.counts()
	return s.stats.write(w, wl, svc)
}

// Run connects to istiod and publishes the first complete state (the
// first WDS response applied) and then one update per batch of responses
// that changed a tree service or the node's locality. It returns nil when
// ctx ends; it never gives up on istiod.
func (s *Source) Run(ctx context.Context, publish func(source.Update) error) error {
	conn, err := s.cfg.dial() // a bad address fails here, before the first update
	if err != nil {
		return err
	}
	conn.Close()
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel: the client has returned
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Go(func() { s.client.run(ctx) })
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.st.kick:
		}
		if u, ok := s.sync(); ok {
			s.applied(u, publish(u))
		}
	}
}

// sync maps the services that changed and returns the update, false when
// no tree service and not the locality changed.
func (s *Source) sync() (source.Update, bool) {
	snap := s.st.take(s.cfg.NodeName)
	if !snap.complete {
		return source.Update{}, false
	}
	changed := map[string]bool{}
	for key, in := range snap.inputs {
		s.remap(key, in, changed)
	}
	moved := !maps.Equal(snap.locality, s.locality)
	if moved {
		s.locality = snap.locality
		if net := snap.locality["network"]; net != s.network {
			s.network = net
			s.st.all() // VIP and reachability depend on the agent's network
		}
	}
	s.stats.setRefused(len(s.refused))
	if s.started && len(changed) == 0 && !moved {
		return source.Update{}, false
	}
	for name := range s.rejected {
		changed[name] = true
	}
	s.started = true
	return source.Update{
		Changed: slices.Sorted(maps.Keys(changed)), Services: specIndex(s.byName),
		Locality: s.locality, LocalityChanged: moved, Observed: snap.since,
	}, true
}

// remap maps one WDS service again; a service the tree cannot hold keeps
// its last tree services, and is logged once per reason.
func (s *Source) remap(key string, in *mapInput, changed map[string]bool) {
	var specs []shared.ServiceSpec
	if in != nil {
		var err error
		if specs, err = treeServices(in); err != nil {
			if s.refused[key] != err.Error() {
				s.cfg.Logger.Warn("xds: service refused; it keeps its last tree services", "service", key, "reason", err)
				s.refused[key] = err.Error()
			}
			return
		}
	}
	delete(s.refused, key)
	old := s.specs[key]
	if reflect.DeepEqual(old, specs) {
		return
	}
	for _, sp := range old {
		delete(s.byName, sp.Name)
		changed[sp.Name] = true
	}
	for i := range specs {
		s.byName[specs[i].Name] = &specs[i]
		changed[specs[i].Name] = true
	}
	if specs == nil {
		delete(s.specs, key)
	} else {
		s.specs[key] = specs
	}
}

// applied records whether the agent applied the update just published; the
// services of a rejected one are named again in the next.
func (s *Source) applied(u source.Update, err error) {
	if err == nil {
		clear(s.rejected)
		return
	}
	for _, name := range u.Changed {
		s.rejected[name] = true
	}
}

// specIndex reads tree services by name. The map is the Run goroutine's:
// the agent reads it during publish, while Run waits.
type specIndex map[string]*shared.ServiceSpec

func (x specIndex) Has(name string) bool { _, ok := x[name]; return ok }

func (x specIndex) Spec(name string) (*shared.ServiceSpec, error) {
	if sp, ok := x[name]; ok {
		return sp, nil
	}
	return nil, fmt.Errorf("no service %q", name)
}
