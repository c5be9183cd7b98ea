package loader

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/loctree/loctree/internal/kerneltest"
	"github.com/loctree/loctree/shared"
)

// TestReadyMeansRedirected: the agent answers /healthz and /v1/tree only
// once its programs are attached. Between the first install and the attach
// both say 503; the first 200 of /v1/tree is followed at once by a connect
// through a VIP, which must be redirected.
func TestReadyMeansRedirected(t *testing.T) {
	kerneltest.RequireRoot(t)
	cg := kerneltest.Cgroup(t)
	kerneltest.Backends(t, []string{"127.0.22.1:9400"})
	topo := filepath.Join(t.TempDir(), "mesh.yaml")
	os.WriteFile(topo, []byte(`services:
- name: ready
  vip: 127.77.3.1:80
  scopes: [region]
  endpoints:
  - address: 127.0.22.1:9400
    locality: {region: r1}
`), 0o644)
	listen := kerneltest.FreeAddr(t)
	status := func(path string) int {
		resp, err := http.Get("http://" + listen + path)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	var before [2]int
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, AgentConfig{Topology: topo, Cgroup: cg, Listen: listen, Locality: shared.Locality{"region": "r1"},
			beforeAttach: func() { before = [2]int{status("/healthz"), status("/v1/tree")} }})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
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
