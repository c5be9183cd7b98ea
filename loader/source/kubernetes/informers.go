package kubernetes

import (
	"context"
	"fmt"
	"sync"

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

// informerSet is the informers the source runs, built on the narrow Client
// instead of a SharedInformerFactory (which needs a whole clientset), and
// the DestinationRule informer when there is an Istio client.
type informerSet struct {
	services, slices, nodes, namespaces cache.SharedIndexInformer
	rules                               cache.SharedIndexInformer // nil: DestinationRules are not watched
	wg                                  sync.WaitGroup
}

func newInformerSet(c Client) *informerSet {
	return &informerSet{
		services: informer(c, &corev1.Service{}, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return c.CoreV1().Services("").List(ctx, o)
		}, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return c.CoreV1().Services("").Watch(ctx, o)
		}),
		slices: informer(c, &discoveryv1.EndpointSlice{}, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return c.DiscoveryV1().EndpointSlices("").List(ctx, o)
		}, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return c.DiscoveryV1().EndpointSlices("").Watch(ctx, o)
		}),
		nodes: informer(c, &corev1.Node{}, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return c.CoreV1().Nodes().List(ctx, o)
		}, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return c.CoreV1().Nodes().Watch(ctx, o)
		}),
		namespaces: informer(c, &corev1.Namespace{}, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return c.CoreV1().Namespaces().List(ctx, o)
		}, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return c.CoreV1().Namespaces().Watch(ctx, o)
		}),
	}
}

// informer lists and watches one kind, as client-go's generated informers
// do: the client tells whether it supports watch-list semantics (the fake
// clientset does not).
func informer(c Client, obj runtime.Object, list func(context.Context, metav1.ListOptions) (runtime.Object, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error)) cache.SharedIndexInformer {
	lw := &cache.ListWatch{
		ListWithContextFunc:  list,
		WatchFuncWithContext: watchFn,
	}
	return cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, c), obj, 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
}

func (i *informerSet) all() map[string]cache.SharedIndexInformer {
	all := map[string]cache.SharedIndexInformer{"services": i.services, "endpointslices": i.slices, "nodes": i.nodes, "namespaces": i.namespaces}
	if i.rules != nil {
		all["destinationrules"] = i.rules
	}
	return all
}

// start runs the informers until ctx is done.
func (i *informerSet) start(ctx context.Context) {
	for _, inf := range i.all() {
		i.wg.Go(func() { inf.RunWithContext(ctx) })
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

// stop waits for the informers, once ctx is done.
func (i *informerSet) stop() { i.wg.Wait() }
