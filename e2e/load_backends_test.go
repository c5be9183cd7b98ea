package e2e

import (
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// loadBackends run the scenario's backends on their addresses (127.0.0.0/8
// only) until the test ends. Each answers with its own address in
// X-Backend, 200 after the service time, or 503 when it holds workers +
// queue requests already.
type loadBackends struct {
	held atomic.Int64 // requests held by all backends
}

const backendHeader = "X-Backend"

func startLoadBackends(t *testing.T, sc *loadScenario) *loadBackends {
	t.Helper()
	lb := &loadBackends{}
	for _, z := range sc.zones {
		for _, a := range z.endpoints {
			if ip := net.ParseIP(strings.Split(a, ":")[0]); ip == nil || !ip.IsLoopback() {
				t.Fatalf("backend %q is not on 127.0.0.0/8", a)
			}
			ln, err := net.Listen("tcp", a)
			if err != nil {
				t.Fatalf("backend %s: %v", a, err)
			}
			srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: lb.handler(sc, a)}
			go srv.Serve(ln)
			t.Cleanup(func() { srv.Close() })
		}
	}
	return lb
}

// handler is one backend: a worker pool of sc.workers, a queue of
// sc.queue, and a fixed service time.
func (lb *loadBackends) handler(sc *loadScenario, addr string) http.Handler {
	workers := make(chan struct{}, sc.workers)
	var held atomic.Int64
	limit := int64(sc.workers + sc.queue)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(backendHeader, addr)
		if held.Add(1) > limit {
			held.Add(-1)
			http.Error(w, addr+" is overloaded", http.StatusServiceUnavailable)
			return
		}
		lb.held.Add(1)
		defer func() { held.Add(-1); lb.held.Add(-1) }()
		select {
		case workers <- struct{}{}:
		case <-r.Context().Done():
			return
		}
		time.Sleep(sc.service)
		<-workers
		io.WriteString(w, addr)
	})
}

// drained waits until no backend holds a request (the previous run's
// stragglers are done), at most 10 s.
func (lb *loadBackends) drained(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); lb.held.Load() > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("backends still hold %d requests 10 s after the load stopped", lb.held.Load())
		}
	}
}
