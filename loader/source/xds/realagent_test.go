package xds

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/loader"
)

// TestRealAgent runs the real agent (loader.Run: BPF programs attached to
// a child cgroup) with the xDS source. While istiod is down the agent is
// not ready (/healthz 503: no complete state yet); once istiod serves, the
// first complete state is installed (/healthz 200) and /metrics carries
// the source's stream, last ACKed version, NACKs and resources; when
// istiod goes away again the agent serves its last tree and /healthz
// says why.
func TestRealAgent(t *testing.T) {
	kerneltest.RequireRoot(t)
	c := onRealIstiod(t)
	c.istiod.Kill()
	c.node(t, "a", "r1", "z1", "")
	c.service(t, realSvc{name: "web", td: "PreferSameZone"})
	c.pod(t, realPod{name: "w1", node: "a", ip: "100.64.1.1", app: "web", ready: true})
	src, err := New(Config{Address: c.istiod.XDSAddress(), NodeName: c.nodeName("a"), MaxBackoff: 200 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	listen := kerneltest.FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- loader.Run(ctx, loader.AgentConfig{Source: src, Cgroup: kerneltest.Cgroup(t), BPFFS: kerneltest.BPFFS(t),
			Listen: listen, Logger: slog.New(slog.DiscardHandler)})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
	})
	kerneltest.Eventually(t, 10*time.Second, "the agent's HTTP server", func() error { _, _, err := get(listen, "/healthz"); return err })
	for range 10 {
		if code, body, _ := get(listen, "/healthz"); code != http.StatusServiceUnavailable {
			t.Fatalf("istiod down, no state yet: /healthz %d %q, want 503", code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := c.istiod.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	kerneltest.Eventually(t, 20*time.Second, "/healthz ok", func() error { return want(listen, "/healthz", http.StatusOK, "ok\n") })
	_, metrics, _ := get(listen, "/metrics")
	parser := expfmt.NewTextParser(model.UTF8Validation)
	if _, err := parser.TextToMetricFamilies(strings.NewReader(metrics)); err != nil {
		t.Errorf("/metrics does not parse: %v", err)
	}
	for _, line := range []string{"loctree_source_up 1", "loctree_xds_connected 1", "loctree_xds_nacks_total 0", "loctree_xds_last_acked{version=", "loctree_services 1"} {
		if !strings.Contains(metrics, line) {
			t.Errorf("/metrics has no %q", line)
		}
	}
	c.istiod.Kill()
	kerneltest.Eventually(t, 10*time.Second, "/healthz names the source", func() error {
		return want(listen, "/healthz", http.StatusOK, "source: xds "+c.istiod.XDSAddress()+": no stream for")
	})
}

func get(listen, path string) (int, string, error) {
	resp, err := http.Get("http://" + listen + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

func want(listen, path string, code int, substr string) error {
	got, body, err := get(listen, path)
	if err != nil {
		return err
	}
	if got != code || !strings.Contains(body, substr) {
		return &httpMismatch{got, body}
	}
	return nil
}

type httpMismatch struct {
	code int
	body string
}

func (e *httpMismatch) Error() string { return http.StatusText(e.code) + ": " + e.body }
