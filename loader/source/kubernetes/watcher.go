package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// retryBackoff is how the agent's informers retry a list or watch that
// failed: 100 ms doubling to a 1 s cap, each wait stretched by a random
// 0–100 % (client-go's own jitter factor). client-go's shared informers
// start at 800 ms and double to 30 s, resetting only after 2 min
// (k8s.io/client-go v0.37.2 tools/cache/reflector.go, defaultBackoffInit,
// Max, Reset, Jitter = 1.0): a change written just after an API server
// restart took 6.7–14.4 s to arrive, and a second outage within 2 min
// up to a minute. kube-proxy keeps those defaults (its informers are
// client-go's shared ones). A node agent's tree is stale until its watch
// is back, so the cap is what the convergence budget allows: a retry at
// most 2 s after the server is ready, leaving a second for the list.
//
// The herd: while the server is down every informer retries every 1–2 s
// (5 informers × 5,000 agents ≈ 17,000 connection attempts a second,
// refused by the kernel or a load balancer, not by the server); when it
// is back their relists arrive spread evenly over 2 s rather than at
// once — the budget makes every agent relist within it whatever the
// backoff, and the server's API Priority and Fairness answers excess with
// 429, on which the Reflector backs off the same way.
func retryBackoff() *wait.Backoff {
	return &wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 1, Steps: 8, Cap: time.Second}
}

// watcher is one kind's informer: a cache kept by client-go's Reflector
// through a DeltaFIFO, whose changes go to the handlers added before Run,
// as client-go's shared informer does (tools/cache/controller.go,
// processDeltas), but with the Reflector's retries bounded by
// retryBackoff, which a shared informer does not let its user set.
type watcher struct {
	name     string
	lw       cache.ListerWatcher
	obj      runtime.Object
	indexer  cache.Indexer
	fifo     *cache.DeltaFIFO
	handlers []cache.ResourceEventHandler
	health   *callHealth // of lw's calls (loggedLW)
}

func newWatcher(name string, lw cache.ListerWatcher, obj runtime.Object, health *callHealth) *watcher {
	indexer := cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	return &watcher{
		name: name, lw: lw, obj: obj, indexer: indexer, health: health,
		fifo: cache.NewDeltaFIFOWithOptions(cache.DeltaFIFOOptions{KnownObjects: indexer, EmitDeltaTypeReplaced: true}),
	}
}

// AddIndexers adds indexes to the cache; call it before Run.
func (w *watcher) AddIndexers(ix cache.Indexers) error { return w.indexer.AddIndexers(ix) }

// GetIndexer is the cache.
func (w *watcher) GetIndexer() cache.Indexer { return w.indexer }

// AddEventHandler adds a handler of every change; call it before Run.
func (w *watcher) AddEventHandler(h cache.ResourceEventHandler) {
	w.handlers = append(w.handlers, h)
}

// HasSynced reports whether the first list has reached the cache and the
// handlers.
func (w *watcher) HasSynced() bool { return w.fifo.HasSynced() }

// Run lists and watches until ctx ends, applying every change to the cache
// and the handlers, and returns when both the Reflector and the queue have
// stopped.
func (w *watcher) Run(ctx context.Context) {
	r := cache.NewReflectorWithOptions(w.lw, w.obj, w.fifo, cache.ReflectorOptions{
		Name: w.name, TypeDescription: w.name, Backoff: retryBackoff(),
	})
	var wg sync.WaitGroup
	wg.Go(func() { r.RunWithContext(ctx) })
	wg.Go(func() { <-ctx.Done(); w.fifo.Close() })
	for {
		if _, err := w.fifo.Pop(w.process); errors.Is(err, cache.ErrFIFOClosed) {
			break
		}
	}
	wg.Wait()
}

// process applies one object's deltas to the cache, then to the handlers.
func (w *watcher) process(obj any, initial bool) error {
	deltas, ok := obj.(cache.Deltas)
	if !ok {
		return fmt.Errorf("%s: unexpected %T in the queue", w.name, obj)
	}
	for _, d := range deltas {
		if err := w.apply(d, initial); err != nil {
			return fmt.Errorf("%s: %w", w.name, err)
		}
	}
	return nil
}

func (w *watcher) apply(d cache.Delta, initial bool) error {
	if d.Type == cache.Deleted {
		if err := w.indexer.Delete(d.Object); err != nil {
			return err
		}
		for _, h := range w.handlers {
			h.OnDelete(d.Object)
		}
		return nil
	}
	old, exists, err := w.indexer.Get(d.Object)
	if err != nil {
		return err
	}
	if exists {
		if err := w.indexer.Update(d.Object); err != nil {
			return err
		}
		for _, h := range w.handlers {
			h.OnUpdate(old, d.Object)
		}
		return nil
	}
	if err := w.indexer.Add(d.Object); err != nil {
		return err
	}
	for _, h := range w.handlers {
		h.OnAdd(d.Object, initial)
	}
	return nil
}

// loggedLW sends the failures of a list or watch call to log, named by
// resource (a 403 names what the agent's role lacks), and records the
// outcome of each call in health: the Reflector's own report of them goes
// to klog.
func loggedLW(name string, lw *cache.ListWatch, log *slog.Logger, health *callHealth) *cache.ListWatch {
	list, watchFn := lw.ListWithContextFunc, lw.WatchFuncWithContext
	lw.ListWithContextFunc = func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		obj, err := list(ctx, o)
		health.record(ctx, log, name, "list", err)
		return obj, err
	}
	lw.WatchFuncWithContext = func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		w, err := watchFn(ctx, o)
		health.record(ctx, log, name, "watch", err)
		if err != nil {
			return w, err
		}
		health.opened()
		return &trackedWatch{Interface: w, health: health}, nil
	}
	return lw
}

// trackedWatch tells its informer's callHealth when the Reflector stops
// it, which it does whenever the watch ends.
type trackedWatch struct {
	watch.Interface
	health *callHealth
	once   sync.Once
}

func (w *trackedWatch) Stop() {
	w.once.Do(w.health.closed)
	w.Interface.Stop()
}

// watchGap is how long an informer may go without an open watch before
// its health says so. The server ends each watch every 5–10 min and the
// Reflector opens the next within milliseconds; a watch that ended
// because its connection was lost (the HTTP/2 health check) is retried by
// client-go's rest client without an error while new connections fail
// with EOF — up to 10 times, 1 s apart, then it hands the Reflector an
// empty watch (k8s.io/client-go v0.37.2 rest/request.go, Request.Watch:
// IsProbableEOF errors are retryable; rest/with_retry.go) — so no call
// fails in the meantime.
const watchGap = time.Second

// errNoWatch: an informer's watch ended and no new one is open yet.
var errNoWatch = errors.New("its watch ended and none is open yet; reconnecting")

// callHealth is the outcome of an informer's last list or watch call: the
// error of the one that failed, and since when calls have failed; and
// whether a watch is open, or since when none has been.
type callHealth struct {
	mu    sync.Mutex
	err   error
	since time.Time
	open  int       // watches open
	ended time.Time // when the last open watch ended
}

func (h *callHealth) opened() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.open++
}

func (h *callHealth) closed() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.open--
	h.ended = time.Now()
}

// record keeps a call's outcome and logs a failure; a call ended by the
// source's own stop is neither.
func (h *callHealth) record(ctx context.Context, log *slog.Logger, name, call string, err error) {
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		log.Warn("kubernetes "+call+" failed; retrying", "resource", name, "err", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err == nil || h.err == nil {
		h.since = time.Now()
	}
	h.err = err
}

// failing returns the last call's error (nil when it succeeded) and since
// when calls have failed; or errNoWatch and since when, once the informer
// has been without a watch for longer than watchGap.
func (h *callHealth) failing() (time.Time, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err == nil && h.open == 0 && !h.ended.IsZero() && time.Since(h.ended) > watchGap {
		return h.ended, errNoWatch
	}
	return h.since, h.err
}
