package wasmproxy

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
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

func TestReliabilityBodyBudget(t *testing.T) {
	p := &Proxy{Header: "h", MaxBuffered: 100}
	p.budget().take(100)
	r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/x", strings.NewReader("hello"))
	w := httptest.NewRecorder()
	p.ServeHTTP(w, r)
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
		t.Fatalf("status %d, want 503 with Retry-After", w.Code)
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
	if held.Load() != 5 || p.budget().used.Load() != 5 {
		t.Fatalf("held %d, budget used %d; want 5 and 5", held.Load(), p.budget().used.Load())
	}
}
