package loader

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loctree/loctree/shared"
)

// The agent answers /healthz and /v1/tree to a proxy while another local
// client holds 300 slowloris connections (headers sent a line at a time)
// and 300 that send requests and never read the answers: more than the
// server's 256 connections. Before, the proxy's requests waited behind the
// flood for over 3 s.
func TestHealthAndTreeUnderConnectionFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("600 connections for 5s")
	}
	if raceEnabled {
		t.Skip("a latency bound under 600 connections: the race detector's slowdown measures the detector, not the server; make test runs it")
	}
	addr, open := startFloodedServer(t)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	attacker := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}, Timeout: time.Second}
	for i := range 600 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%2 == 0 {
				flood(ctx, attacker, addr, slowloris)
			} else {
				flood(ctx, attacker, addr, nonReading)
			}
		}()
	}
	time.Sleep(1500 * time.Millisecond) // the flood holds every connection it can
	if n := open.Load(); n < int64(serverLimits.MaxConns) {
		t.Fatalf("the flood holds %d connections, want the server's %d", n, serverLimits.MaxConns)
	}
	proxy := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext}}
	var worst time.Duration
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		for _, path := range []string{"/healthz", "/v1/tree"} {
			start := time.Now()
			resp, err := proxy.Get("http://" + addr + path)
			if err != nil {
				t.Fatalf("%s under the flood: %v", path, err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			took := time.Since(start)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s under the flood: status %d", path, resp.StatusCode)
			}
			worst = max(worst, took)
		}
	}
	t.Logf("slowest answer under the flood: %s", worst)
	// Without the shared cap no answer came within the client's 3 s; with
	// it the slowest took 10-20 ms on a quiet machine and up to 1.8 s on one
	// loaded to 8 runnable tasks per core pair (a CI beside benchmarks).
	if worst > 2500*time.Millisecond {
		t.Fatalf("slowest answer under the flood %s, want under 2.5s", worst)
	}
}

// startFloodedServer serves /healthz and a tree of 200 endpoints at
// /v1/tree with the agent's limits on 127.0.0.1; open counts the
// connections the server serves.
func startFloodedServer(t *testing.T) (addr string, open *atomic.Int64) {
	var eps []shared.EndpointSpec
	for i := range 200 {
		eps = append(eps, shared.EndpointSpec{Address: fmt.Sprintf("127.0.%d.%d:80", 10+i/200, 1+i%200), Locality: shared.Locality{"region": "r"}})
	}
	tree, err := shared.Build(&shared.Topology{Services: []shared.ServiceSpec{{Name: "reviews", Endpoints: eps}}}, shared.BuildOptions{Generation: 1})
	if err != nil {
		t.Fatal(err)
	}
	trees := &TreeServer{}
	trees.Set(tree)
	mux := http.NewServeMux()
	mux.Handle("/v1/tree", trees)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	ln, err := listenHTTP("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newHTTPServer(mux)
	open = new(atomic.Int64)
	srv.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			open.Add(1)
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), open
}

// flood runs attack on a connection to addr, again and again (a pause
// between), until ctx ends.
func flood(ctx context.Context, d *net.Dialer, addr string, attack func(context.Context, net.Conn)) {
	for ctx.Err() == nil {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			stop := context.AfterFunc(ctx, func() { c.Close() })
			attack(ctx, c)
			stop()
			c.Close()
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// slowloris sends a request's headers a line every 500 ms, never ending
// them, until the server closes the connection.
func slowloris(ctx context.Context, c net.Conn) {
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: agent\r\n"); err != nil {
		return
	}
	for i := 0; ctx.Err() == nil; i++ {
		time.Sleep(500 * time.Millisecond)
		if _, err := fmt.Fprintf(c, "X-Slow-%d: 1\r\n", i); err != nil {
			return
		}
	}
}

// nonReading sends 2000 pipelined tree requests and reads nothing, until
// the server closes the connection (a write fails: the server, closing with
// requests unread, resets it).
func nonReading(ctx context.Context, c net.Conn) {
	req := "GET /v1/tree HTTP/1.1\r\nHost: agent\r\n\r\n"
	c.SetWriteDeadline(time.Now().Add(time.Second))
	if _, err := io.WriteString(c, strings.Repeat(req, 2000)); err != nil && !isTimeout(err) {
		return
	}
	for ctx.Err() == nil {
		time.Sleep(200 * time.Millisecond)
		c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		if _, err := io.WriteString(c, req); err != nil && !isTimeout(err) {
			return
		}
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// docs/AGENT.md gives the connection cap and the waiting room.
func TestDocsConnectionCap(t *testing.T) {
	doc, err := os.ReadFile("../docs/AGENT.md")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(doc)), " ")
	for _, want := range []string{
		fmt.Sprintf("keeps at most %d client connections open", serverLimits.MaxConns),
		fmt.Sprintf("The %d are shared between clients", serverLimits.MaxConns),
		fmt.Sprintf("newcomers wait (%d at most", serverLimits.MaxConns/4), // httpserve: a quarter of the cap
	} {
		if !strings.Contains(text, want) {
			t.Errorf("docs/AGENT.md does not say %q", want)
		}
	}
}
