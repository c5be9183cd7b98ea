package kubernetes

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/loctree/loctree/loader/source"
)

// Update is the source package's Update: what Run publishes.
type Update = source.Update

// Source implements source.Source and source.Health.
var (
	_ source.Source = (*Source)(nil)
	_ source.Health = (*Source)(nil)
)

// Config configures a Source.
type Config struct {
	// Client talks to the API server (NewClient; a fake clientset in tests).
	Client Client
	// NodeName is the node the agent runs on (the downward API's spec.nodeName).
	NodeName string
	// ClusterID is the value of the cluster scope.
	ClusterID string
	// Domain is the cluster DNS domain; default "cluster.local".
	Domain string
	// Debounce is the quiet time after a change before an update is published;
	// default 100ms. MaxDelay bounds how long changes are held back; default 1s.
	Debounce, MaxDelay time.Duration
	// Logger gets warnings about bad annotations; default slog.Default().
	Logger *slog.Logger
	// Istio reads Istio's DestinationRules (NewIstioClient); nil: they are
	// not watched.
	Istio dynamic.Interface
	// Mesh is Istio's mesh configuration; zero: DefaultMesh().
	Mesh Mesh
}

// Source watches the API server and publishes topologies.
type Source struct {
	cfg       Config
	informers *informerSet
	services  corelisters.ServiceLister
	byName    cache.Indexer // Services by name (nameIndex)
	slices    cache.Indexer
	nodes     corelisters.NodeLister
	nsLister  corelisters.NamespaceLister
	rules     ruleSet
	events    *eventSink
	kick      chan struct{}

	mu    sync.Mutex
	dirty dirtySet

	state *state // owned by the Run goroutine
}

// dirtySet is what changed since the last sync.
type dirtySet struct {
	services   map[string]struct{} // namespace/name
	nodes      map[string]struct{}
	namespaces map[string]struct{} // every Service in them
	all        bool
	since      time.Time // the arrival of the first event marked
}

// serviceIndex indexes EndpointSlices by their Service's namespace/name,
// nameIndex Services by their name alone.
const (
	serviceIndex = "service"
	nameIndex    = "name"
)

// New checks the configuration and sets up (but does not start) the informers.
func New(cfg Config) (*Source, error) {
	if cfg.Client == nil || cfg.NodeName == "" {
		return nil, fmt.Errorf("%w: a client and a node name are required", ErrConfig)
	}
	cfg.Domain = orDefault(cfg.Domain, "cluster.local")
	cfg.Debounce = orDefault(cfg.Debounce, 100*time.Millisecond)
	cfg.MaxDelay = orDefault(cfg.MaxDelay, time.Second)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Mesh.RootNamespace == "" && cfg.Mesh.LocalityLB == nil {
		cfg.Mesh = DefaultMesh()
	}
	s := &Source{cfg: cfg, kick: make(chan struct{}, 1)}
	s.informers = newInformerSet(cfg.Client, cfg.Logger)
	if cfg.Istio != nil {
		s.informers.rules = ruleInformer(cfg.Istio, cfg.Logger)
	}
	if err := s.setupInformers(); err != nil {
		return nil, err
	}
	return s, nil
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

func (s *Source) setupInformers() error {
	inf := s.informers
	if err := inf.slices.AddIndexers(cache.Indexers{serviceIndex: sliceServiceKey}); err != nil {
		return fmt.Errorf("index endpoint slices: %w", err)
	}
	if err := inf.services.AddIndexers(cache.Indexers{nameIndex: serviceName}); err != nil {
		return fmt.Errorf("index services: %w", err)
	}
	s.services = corelisters.NewServiceLister(inf.services.GetIndexer())
	s.byName = inf.services.GetIndexer()
	s.slices = inf.slices.GetIndexer()
	s.nodes = corelisters.NewNodeLister(inf.nodes.GetIndexer())
	s.nsLister = corelisters.NewNamespaceLister(inf.namespaces.GetIndexer())
	handlers := []struct {
		inf *watcher
		fn  func(obj any)
	}{
		{inf.services, s.onService},
		{inf.slices, s.onSlice},
		{inf.nodes, s.onNode},
		{inf.namespaces, s.onNamespace},
	}
	if inf.rules != nil {
		inf.rules.AddEventHandler(s.ruleHandler())
	}
	for _, h := range handlers {
		h.inf.AddEventHandler(onAnyChange(h.fn))
	}
	return nil
}

func serviceName(obj any) ([]string, error) {
	if svc, ok := obj.(*corev1.Service); ok {
		return []string{svc.Name}, nil
	}
	return nil, nil
}

func sliceServiceKey(obj any) ([]string, error) {
	sl, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return nil, nil
	}
	name := sl.Labels[discoveryv1.LabelServiceName]
	if name == "" {
		return nil, nil
	}
	return []string{sl.Namespace + "/" + name}, nil
}

// onAnyChange calls fn with the object of an add, both the old and the new
// object of an update (an EndpointSlice may move to another Service), and
// the last known object of a delete.
func onAnyChange(fn func(obj any)) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    fn,
		UpdateFunc: func(old, obj any) { fn(old); fn(obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			fn(obj)
		},
	}
}

// onService marks the Service, and the Services of the same name in other
// namespaces, whose bare host names depend on it (hosts).
func (s *Source) onService(obj any) {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return
	}
	s.markService(svc.Namespace + "/" + svc.Name)
	same, _ := s.byName.ByIndex(nameIndex, svc.Name)
	for _, o := range same {
		if other, ok := o.(*corev1.Service); ok && other.Namespace != svc.Namespace {
			s.markService(other.Namespace + "/" + other.Name)
		}
	}
}

func (s *Source) onSlice(obj any) {
	if keys, _ := sliceServiceKey(obj); len(keys) == 1 {
		s.markService(keys[0])
	}
}

func (s *Source) onNode(obj any) {
	if n, ok := obj.(*corev1.Node); ok {
		s.mark(func(d *dirtySet) { d.nodes[n.Name] = struct{}{} })
	}
}

func (s *Source) onNamespace(obj any) {
	if ns, ok := obj.(*corev1.Namespace); ok {
		s.markNamespace(ns.Name)
	}
}

func (s *Source) markNamespace(ns string) {
	s.mark(func(d *dirtySet) {
		if ns == s.cfg.Mesh.RootNamespace {
			d.all = true
		}
		d.namespaces[ns] = struct{}{}
	})
}

// ruleHandler keeps the decoded rules and marks the Services they may
// apply to, before and after a change (markRule).
func (s *Source) ruleHandler() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { s.putRule(obj) },
		UpdateFunc: func(old, obj any) {
			if u, ok := old.(*unstructured.Unstructured); ok {
				s.markRule(decodeDestinationRule(u))
			}
			s.putRule(obj)
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if u, ok := obj.(*unstructured.Unstructured); ok {
				s.rules.remove(u.GetNamespace(), u.GetName())
				s.markRule(decodeDestinationRule(u))
			}
		},
	}
}

func (s *Source) putRule(obj any) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		dr := decodeDestinationRule(u)
		s.rules.put(dr)
		s.markRule(dr)
	}
}

// markRule marks the Services a rule may apply to: a rule applies to the
// Services of its own namespace (every namespace's for the root
// namespace), so a rule for one Service host marks that Service, and a
// wildcard or unreadable rule its whole namespace (every Service for the
// root namespace).
func (s *Source) markRule(dr *destinationRule) {
	if dr.err == nil {
		name, ns, ok := serviceHost(dr.hostFQDN(s.cfg.Domain), s.cfg.Domain)
		if ok && (ns == dr.namespace || dr.namespace == s.cfg.Mesh.RootNamespace) {
			s.markService(ns + "/" + name)
			return
		}
		if ok || dr.spec.Host == "" {
			return // another namespace's Service: the rule applies to it nowhere
		}
	}
	s.markNamespace(dr.namespace)
}

// serviceHost splits a Service FQDN name.ns.svc.domain.
func serviceHost(h, domain string) (name, ns string, ok bool) {
	rest, found := strings.CutSuffix(h, ".svc."+domain)
	if !found || strings.HasPrefix(h, "*") {
		return "", "", false
	}
	name, ns, ok = strings.Cut(rest, ".")
	return name, ns, ok && !strings.Contains(ns, ".")
}

func (s *Source) markService(key string) {
	s.mark(func(d *dirtySet) { d.services[key] = struct{}{} })
}

func (s *Source) mark(fn func(*dirtySet)) {
	s.mu.Lock()
	if s.dirty.services == nil {
		s.dirty.services, s.dirty.nodes, s.dirty.namespaces = map[string]struct{}{}, map[string]struct{}{}, map[string]struct{}{}
		s.dirty.since = time.Now()
	}
	fn(&s.dirty)
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *Source) takeDirty() dirtySet {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.dirty
	s.dirty = dirtySet{}
	return d
}

// Health is nil while the API server answers every informer's list and
// watch calls; else why the last call of the first failing one (by
// resource name) failed, and for how long they have.
func (s *Source) Health() error { return s.informers.health() }

// Run starts the informers, waits for their caches, publishes the first full
// update and then one update per debounced batch of changes that altered the
// topology or this node's locality. It returns nil when ctx ends, or
// ErrNotSynced if the caches never synced. publish runs on Run's goroutine.
func (s *Source) Run(ctx context.Context, publish func(Update) error) error {
	s.events = newEventSink(s.cfg.Client, s.cfg.NodeName)
	defer s.events.shutdown()
	ctx, cancel := context.WithCancel(ctx)
	defer s.informers.stop() // after cancel: the informers have returned
	defer cancel()
	s.informers.start(ctx)
	if err := s.informers.waitForSync(ctx); err != nil {
		return err
	}
	s.state = newState()
	s.mark(func(d *dirtySet) { d.all = true })
	for s.wait(ctx) {
		if u, ok := s.sync(); ok {
			s.state.applied(u, publish(u))
		}
	}
	return nil
}

// wait blocks until a change arrives, then until Debounce passes with no
// further change or MaxDelay passes. It returns false when ctx ends.
func (s *Source) wait(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return false
	case <-s.kick:
	}
	deadline := time.NewTimer(s.cfg.MaxDelay)
	defer deadline.Stop()
	quiet := time.NewTimer(s.cfg.Debounce)
	defer quiet.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-s.kick:
			quiet.Reset(s.cfg.Debounce)
		case <-quiet.C:
			return true
		case <-deadline.C:
			return true
		}
	}
}
