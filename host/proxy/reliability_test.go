package proxy

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Reliability: bodies through `wasm serve` (issue 9 item 6): never cut and
// answered as a success.

// A request body over the limit is 413, found before the filter runs.
func TestReliabilityRequestBodyTooLarge(t *testing.T) {
	p := &Proxy{Header: "h"}
	body := bytes.Repeat([]byte("x"), maxBody+1)
	for _, chunked := range []bool{false, true} {
		r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/x", bytes.NewReader(body))
		if chunked {
			r.ContentLength = -1
		}
		w := httptest.NewRecorder()
		func() {
			defer func() {
				if v := recover(); v != nil {
					t.Fatalf("chunked=%v: panic %v: the body was read and the request went on", chunked, v)
				}
			}()
			p.ServeHTTP(w, r)
		}()
		if w.Code != http.StatusRequestEntityTooLarge {
			t.Errorf("chunked=%v: status %d, want 413", chunked, w.Code)
		}
	}
}

// An upstream response body over the limit is a 502, not a cut 200.
func TestReliabilityResponseBodyTooLarge(t *testing.T) {
	big := bytes.Repeat([]byte("y"), maxBody+1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(big) }))
	defer up.Close()
	p := &Proxy{Header: "h"}
	req, _ := http.NewRequest(http.MethodGet, up.URL, nil)
	res, err := p.roundTrip(req)
	if !errors.Is(err, errBadGateway) || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("error %v (response %v), want a bad gateway naming the limit", err, res != nil)
	}
}

// Bodies held at once are bounded: past the budget a request waits, and
// gets 503 when its time is up.
func TestReliabilityBodyBudget(t *testing.T) {
	p := &Proxy{Header: "h", Timeout: 100 * time.Millisecond}
	all := int64(defaultMaxBuffered)
	p.budget(requestBodies).take(context.Background(), all)
	r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/x", strings.NewReader("hello"))
	w := httptest.NewRecorder()
	p.ServeHTTP(w, r)
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
		t.Fatalf("status %d, want 503 with Retry-After", w.Code)
	}
	// A waiting body goes on as soon as room is given back.
	done := make(chan error, 1)
	go func() {
		_, n, err := readBody(context.Background(), strings.NewReader("hello"), 5, p.budget(requestBodies))
		p.budget(requestBodies).give(n)
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	p.budget(requestBodies).give(all)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if free := p.budget(requestBodies).free; free != all {
		t.Fatalf("budget free %d after all bodies were given back, want %d", free, all)
	}
}

// A forwarded response's body is charged to its request until it ends.
func TestReliabilityResponseHeld(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("12345")) }))
	defer up.Close()
	p := &Proxy{Header: "h"}
	held := new(atomic.Int64)
	req, _ := http.NewRequestWithContext(context.WithValue(context.Background(), heldKey{}, held), http.MethodGet, up.URL, nil)
	if _, err := p.roundTrip(req); err != nil {
		t.Fatal(err)
	}
	if used := defaultMaxBuffered - p.budget(responseBodies).free; held.Load() != 5 || used != 5 {
		t.Fatalf("held %d, budget used %d; want 5 and 5", held.Load(), used)
	}
}

// TestDefaultClientReusesConnections: 16 requests at a time to one
// endpoint, 8 rounds, through a proxy with no Client of its own, reuse
// their connections: the endpoint sees at most the 16 of the first round
// (net/http's default client keeps 2 idle per host: it opened a new
// connection for 14 requests of every round).
func TestDefaultClientReusesConnections(t *testing.T) {
	var conns atomic.Int64
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(5 * time.Millisecond) // the 16 overlap
		w.Write([]byte("ok"))
	}))
	up.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	up.Start()
	defer up.Close()
	p := &Proxy{Header: "h"}
	const parallel, rounds = 16, 8
	for range rounds {
		var wg sync.WaitGroup
		for range parallel {
			wg.Go(func() {
				req, _ := http.NewRequest(http.MethodGet, up.URL, nil)
				if _, err := p.roundTrip(req); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	if n := conns.Load(); n > parallel {
		t.Fatalf("%d connections for %d rounds of %d requests, want at most %d (idle ones reused)", n, rounds, parallel, parallel)
	}
}
