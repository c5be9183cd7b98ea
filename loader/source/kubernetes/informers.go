package kubernetes

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	typeddiscoveryv1 "k8s.io/client-go/kubernetes/typed/discovery/v1"
	"k8s.io/client-go/tools/cache"
)

// Client is the part of the Kubernetes API the source uses: Services,
// Nodes and Events (core/v1) and EndpointSlices (discovery/v1). A full
// clientset (k8s.io/client-go/kubernetes, or its fake) is one; NewClient
// builds only these two groups, so the agent does not link a client for
// every API group.
type Client interface {
	CoreV1() typedcorev1.CoreV1Interface
	DiscoveryV1() typeddiscoveryv1.DiscoveryV1Interface
}

// informerSet is the informers the source runs (watchers, built on the
// narrow Client instead of a SharedInformerFactory, which needs a whole
// clientset, and with bounded retries), and the DestinationRule informer
// when there is an Istio client.
type informerSet struct {
	services, slices, nodes, namespaces *watcher
	rules                               *watcher // nil: DestinationRules are not watched
	wg                                  sync.WaitGroup
}

func newInformerSet(c Client, log *slog.Logger) *informerSet {
	return &informerSet{
		services: informer(c, log, "services", &corev1.Service{}, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return c.CoreV1().Services("").List(ctx, o)
		}, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return c.CoreV1().Services("").Watch(ctx, o)
		}),
		slices: informer(c, log, "endpointslices", &discoveryv1.EndpointSlice{}, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return c.DiscoveryV1().EndpointSlices("").List(ctx, o)
		}, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return c.DiscoveryV1().EndpointSlices("").Watch(ctx, o)
		}),
		nodes: informer(c, log, "nodes", &corev1.Node{}, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return c.CoreV1().Nodes().List(ctx, o)
		}, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return c.CoreV1().Nodes().Watch(ctx, o)
		}),
		namespaces: informer(c, log, "namespaces", &corev1.Namespace{}, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return c.CoreV1().Namespaces().List(ctx, o)
		}, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return c.CoreV1().Namespaces().Watch(ctx, o)
		}),
	}
}

// informer lists and watches one kind, as client-go's generated informers
// do: the client tells whether it supports watch-list semantics (the fake
// clientset does not). Failed calls are logged (loggedLW).
func informer(c Client, log *slog.Logger, name string, obj runtime.Object, list func(context.Context, metav1.ListOptions) (runtime.Object, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error)) *watcher {
	health := &callHealth{}
	lw := loggedLW(name, &cache.ListWatch{ListWithContextFunc: list, WatchFuncWithContext: watchFn}, log, health)
	return newWatcher(name, cache.ToListWatcherWithWatchListSemantics(lw, c), obj, health)
}

func (i *informerSet) all() map[string]*watcher {
	all := map[string]*watcher{"services": i.services, "endpointslices": i.slices, "nodes": i.nodes, "namespaces": i.namespaces}
	if i.rules != nil {
		all["destinationrules"] = i.rules
	}
	return all
}

// start runs the informers until ctx is done.
func (i *informerSet) start(ctx context.Context) {
	for _, inf := range i.all() {
		i.wg.Go(func() { inf.Run(ctx) })
	}
}

// waitForSync waits for every cache; it fails naming the first that did not
// sync before ctx ended.
func (i *informerSet) waitForSync(ctx context.Context) error {
	for name, inf := range i.all() {
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			return fmt.Errorf("%w: %s", ErrNotSynced, name)
		}
	}
	return nil
}

// health is nil while every informer's last list or watch call succeeded;
// else the first failing one's error (by resource name), and for how long
// its calls have failed.
func (i *informerSet) health() error {
	all := i.all()
	for _, name := range slices.Sorted(maps.Keys(all)) {
		if since, err := all[name].health.failing(); err != nil {
			return fmt.Errorf("kubernetes %s failing for %v: %w", name, time.Since(since).Round(time.Second), err)
		}
	}
	return nil
}

// stop waits for the informers, once ctx is done.
func (i *informerSet) stop() { i.wg.Wait() }
