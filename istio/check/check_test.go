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
	r, err := Agent(context.Background(), srv.Client(), srv.URL, 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Healthy || r.Generation != 7 || r.Services != 3 || r.Endpoints != 12 || r.TreeRequests != 4 {
		t.Errorf("report %+v", r)
	}
}

func TestAgentNotPolled(t *testing.T) {
	srv := agent(t, 0, true)
	r, err := Agent(context.Background(), srv.Client(), srv.URL, 10*time.Millisecond)
	if !errors.Is(err, ErrNoFilter) || r == nil || r.TreeRequests != 0 {
		t.Fatalf("err = %v, report %+v", err, r)
	}
	srv = agent(t, 1, false)
	if _, err := Agent(context.Background(), srv.Client(), srv.URL, time.Millisecond); err == nil || !strings.Contains(err.Error(), "older than this check") {
		t.Errorf("agent without the counter: %v", err)
	}
	if _, err := Agent(context.Background(), http.DefaultClient, "http://127.0.0.1:1", time.Millisecond); err == nil {
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
