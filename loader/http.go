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
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if !a.ready.Load() {
			http.Error(w, "first install not done", http.StatusServiceUnavailable)
			return
		}
		if !a.pinsOK.Load() {
			http.Error(w, "the kernel path is not pinned in "+a.cfg.BPFFS+" (bpffs unmounted?): it stops when the agent exits", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	})
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
