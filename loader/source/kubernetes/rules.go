package kubernetes

import (
	"context"
	"log/slog"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
)

// DestinationRuleResource is the API resource of Istio's DestinationRules.
var DestinationRuleResource = schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "destinationrules"}

// crdRecheck is how often the agent looks again for the DestinationRule
// resource while Istio is not installed (a variable for the tests).
var crdRecheck = time.Minute

// ruleInformer lists and watches DestinationRules through the dynamic
// client, as unstructured objects the source decodes itself. Without the
// resource (Istio not installed) the list is empty, logged once, and the
// informer lists again every crdRecheck.
func ruleInformer(c dynamic.Interface, log *slog.Logger) *watcher {
	res := c.Resource(DestinationRuleResource)
	var once sync.Once
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			l, err := res.List(ctx, o)
			if apierrors.IsNotFound(err) {
				once.Do(func() {
					log.Info("DestinationRules are not served (is Istio installed?); looking again every minute", "resource", DestinationRuleResource.String())
				})
				return &unstructured.UnstructuredList{}, nil
			}
			return l, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			w, err := res.Watch(ctx, o)
			if apierrors.IsNotFound(err) {
				return expireAfter(ctx, crdRecheck), nil
			}
			return w, err
		},
	}
	health := &callHealth{}
	lw = loggedLW("destinationrules", lw, log, health)
	return newWatcher("destinationrules", cache.ToListWatcherWithWatchListSemantics(lw, listThenWatch{}), &unstructured.Unstructured{}, health)
}

// listThenWatch makes the informer list and then watch, without watch-list
// streaming, so a missing resource is seen by the list.
type listThenWatch struct{}

func (listThenWatch) IsWatchListSemanticsUnSupported() bool { return true }

// expireAfter is a watch that says, after d, that its resource version
// expired, so the informer lists again.
func expireAfter(ctx context.Context, d time.Duration) watch.Interface {
	ch := make(chan watch.Event, 1)
	w := watch.NewProxyWatcher(ch)
	go func() {
		defer close(ch)
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			ch <- watch.Event{Type: watch.Error, Object: &apierrors.NewResourceExpired("destination rules: looking for the resource again").ErrStatus}
		case <-w.StopChan():
		case <-ctx.Done():
		}
	}()
	return w
}

// ruleSet is the decoded DestinationRules by namespace, written by the
// informer's handlers and read by the sync.
type ruleSet struct {
	mu   sync.RWMutex
	byNs map[string]map[string]*destinationRule
}

func (r *ruleSet) put(dr *destinationRule) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byNs == nil {
		r.byNs = map[string]map[string]*destinationRule{}
	}
	if r.byNs[dr.namespace] == nil {
		r.byNs[dr.namespace] = map[string]*destinationRule{}
	}
	r.byNs[dr.namespace][dr.name] = dr
}

func (r *ruleSet) remove(ns, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.byNs[ns], name)
	if len(r.byNs[ns]) == 0 {
		delete(r.byNs, ns)
	}
}

// in returns the rules of the given namespaces.
func (r *ruleSet) in(namespaces ...string) []*destinationRule {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []*destinationRule
	for i, ns := range namespaces {
		if i > 0 && ns == namespaces[0] {
			continue
		}
		for _, dr := range r.byNs[ns] {
			out = append(out, dr)
		}
	}
	return out
}
