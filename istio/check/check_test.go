package check

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// agent is a stand-in agent on 127.0.0.1 whose tree request counter grows by
// step per /metrics read.
func agent(t *testing.T, step int64, withCounter bool) *httptest.Server {
	var polls atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		n := polls.Add(step)
		fmt.Fprintf(w, "# TYPE loctree_generation gauge\nloctree_generation 7\nloctree_services 3\nloctree_endpoints 12\n")
		if withCounter {
			fmt.Fprintf(w, "loctree_tree_requests_total{code=\"200\"} 1\nloctree_tree_requests_total{code=\"304\"} %d\nloctree_tree_requests_total{code=\"503\"} 0\nloctree_tree_requests_total{code=\"other\"} 0\n", n)
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestAgentPolled(t *testing.T) {
	srv := agent(t, 4, true)
	r, err := Agent(context.Background(), srv.Client(), srv.URL, 10*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Healthy || r.Generation != 7 || r.Services != 3 || r.Endpoints != 12 || r.TreeRequests != 4 {
		t.Errorf("report %+v", r)
	}
}

func TestAgentNotPolled(t *testing.T) {
	srv := agent(t, 0, true)
	r, err := Agent(context.Background(), srv.Client(), srv.URL, 10*time.Millisecond, nil)
	if !errors.Is(err, ErrNoFilter) || r == nil || r.TreeRequests != 0 {
		t.Fatalf("err = %v, report %+v", err, r)
	}
	srv = agent(t, 1, false)
	if _, err := Agent(context.Background(), srv.Client(), srv.URL, time.Millisecond, nil); err == nil || !strings.Contains(err.Error(), "older than this check") {
		t.Errorf("agent without the counter: %v", err)
	}
	if _, err := Agent(context.Background(), http.DefaultClient, "http://127.0.0.1:1", time.Millisecond, nil); err == nil {
		t.Error("no agent: no error")
	}
}

// TestParseAgentMetrics: the series the check reads are in the agent's
// Prometheus text as loader/testdata/metrics.golden pins it.
func TestParseAgentMetrics(t *testing.T) {
	data, err := os.ReadFile("../../loader/testdata/metrics.golden")
	if err != nil {
		t.Fatal(err)
	}
	m := parse(string(data))
	for _, k := range []string{"loctree_generation", "loctree_services", "loctree_endpoints", `loctree_tree_requests_total{code="200"}`, `loctree_tree_requests_total{code="304"}`, `loctree_tree_requests_total{code="503"}`} {
		if _, ok := m[k]; !ok {
			t.Errorf("the agent's metrics have no %s", k)
		}
	}
}

// Issue 20, section 6: an address that is not a loctree agent (any HTTP
// server answering /healthz) gets no report, so nothing prints
// healthy=true generation=0; an agent without the tree request counter
// neither. The wait is not spent on them.
func TestAgentNotAnAgent(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("hello\n")) }))
	defer srv.Close()
	waited := false
	r, err := Agent(context.Background(), srv.Client(), srv.URL, time.Hour, func(time.Duration) { waited = true })
	if !errors.Is(err, ErrNotAgent) || r != nil || waited || !strings.Contains(err.Error(), "no loctree_generation") {
		t.Fatalf("not an agent: report %+v, err %v, waited %v", r, err, waited)
	}
	old := agent(t, 1, false)
	r, err = Agent(context.Background(), old.Client(), old.URL, time.Hour, func(time.Duration) { waited = true })
	if !errors.Is(err, ErrNotAgent) || r != nil || waited || !strings.Contains(err.Error(), "older than this check") {
		t.Fatalf("old agent: report %+v, err %v, waited %v", r, err, waited)
	}
}

// Issue 20, section 6: a window that is not positive counts nothing.
func TestAgentWindow(t *testing.T) {
	srv := agent(t, 1, true)
	for _, w := range []time.Duration{0, -time.Second} {
		if r, err := Agent(context.Background(), srv.Client(), srv.URL, w, nil); err == nil || r != nil || !strings.Contains(err.Error(), "must be positive") {
			t.Errorf("window %s: report %+v, err %v", w, r, err)
		}
	}
	var told time.Duration
	if _, err := Agent(context.Background(), srv.Client(), srv.URL, 5*time.Millisecond, func(d time.Duration) { told = d }); err != nil || told != 5*time.Millisecond {
		t.Errorf("wait told %s, err %v", told, err)
	}
}

// Issue 20, section 2: --agent takes HOST:PORT as well as a URL.
func TestAgentURL(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:15099":         "http://127.0.0.1:15099",
		"http://127.0.0.1:15099":  "http://127.0.0.1:15099",
		"http://127.0.0.1:15099/": "http://127.0.0.1:15099",
		"[::1]:15099":             "http://[::1]:15099",
		"localhost":               "http://localhost",
	} {
		if got, err := AgentURL(in); err != nil || got != want {
			t.Errorf("AgentURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "https://127.0.0.1:1", "ftp://x:1", "http://", "127.0.0.1:1/metrics", "127.0.0.1:1?x=1", "http://u@127.0.0.1:1"} {
		if got, err := AgentURL(bad); err == nil {
			t.Errorf("AgentURL(%q) = %q, no error", bad, got)
		}
	}
}
