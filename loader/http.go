package loader

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// serve starts the HTTP endpoints; the returned func stops them.
func (a *agent) serve() (func(), error) {
	if a.cfg.Listen == "" || a.cfg.Once {
		return func() {}, nil
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/tree", a.metrics.fetches.count(&a.trees))
	mux.Handle("GET /metrics", a.metrics)
	mux.HandleFunc("GET /healthz", a.healthz)
	ln, err := listenHTTP(a.cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	srv := newHTTPServer(mux)
	go srv.Serve(ln)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}, nil
}

// healthz answers 503 until the first install and while the kernel path is
// not pinned; else 200, saying why the source cannot reach where its
// state comes from, if it cannot (the last tree is served meanwhile).
func (a *agent) healthz(w http.ResponseWriter, _ *http.Request) {
	if !a.ready.Load() {
		http.Error(w, "first install not done", http.StatusServiceUnavailable)
		return
	}
	if !a.pinsOK.Load() {
		http.Error(w, "the kernel path is not pinned in "+a.cfg.BPFFS+" (bpffs unmounted?): it stops when the agent exits", http.StatusServiceUnavailable)
		return
	}
	w.Write([]byte("ok\n"))
	if a.metrics.source != nil {
		if err := a.metrics.source(); err != nil {
			fmt.Fprintf(w, "source: %v; serving the last tree\n", err)
		}
	}
}
