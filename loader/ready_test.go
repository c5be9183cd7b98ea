package loader

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/shared"
)

// TestReadyMeansRedirected: the agent answers /healthz and /v1/tree only
// once its programs are attached. Between the first install and the attach
// both say 503; the first 200 of /v1/tree is followed at once by a connect
// through a VIP, which must be redirected.
func TestReadyMeansRedirected(t *testing.T) {
	kerneltest.RequireRoot(t)
	kerneltest.Backends(t, []string{"127.0.22.1:9400"})
	cfg := oneServiceAgent(t, "127.77.3.1:80", "127.0.22.1:9400")
	listen := cfg.Listen
	status := func(path string) int {
		resp, err := http.Get("http://" + listen + path)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	var before [2]int
	cfg.beforeAttach = func() { before = [2]int{status("/healthz"), status("/v1/tree")} }
	runAgent(t, cfg)
	kerneltest.Eventually(t, 10*time.Second, "agent serves /v1/tree", func() error {
		if got := status("/v1/tree"); got != http.StatusOK {
			return fmt.Errorf("/v1/tree: %d", got)
		}
		return nil
	})
	if got, err := kerneltest.Ask("127.77.3.1:80"); err != nil || got != "127.0.22.1:9400" {
		t.Fatalf("first connect after /v1/tree answered: %q, %v", got, err)
	}
	if before != [2]int{http.StatusServiceUnavailable, http.StatusServiceUnavailable} {
		t.Fatalf("installed but not attached: /healthz %d, /v1/tree %d; want 503 for both", before[0], before[1])
	}
}

// oneServiceAgent configures an agent on a child cgroup, with a topology
// file of one service (scopes [region], its endpoint in region r1, the
// agent's own) and a free listen address.
func oneServiceAgent(t *testing.T, vip, endpoint string) AgentConfig {
	t.Helper()
	topo := filepath.Join(t.TempDir(), "mesh.yaml")
	yaml := fmt.Sprintf("services:\n- name: one\n  vip: %s\n  scopes: [region]\n  endpoints:\n  - address: %s\n    locality: {region: r1}\n", vip, endpoint)
	if err := os.WriteFile(topo, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return AgentConfig{Topology: topo, Cgroup: kerneltest.Cgroup(t), Listen: kerneltest.FreeAddr(t),
		Locality: shared.Locality{"region": "r1"}, Watch: 50 * time.Millisecond}
}

// runAgent runs the agent until the test ends; Run must then return nil.
func runAgent(t *testing.T, cfg AgentConfig) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}
