package loader

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loctree/loctree/internal/kerneltest"
	"github.com/loctree/loctree/shared"
)

// TestPinsVanish: the bpffs under a running agent is unmounted. The
// kernel path keeps working (the agent holds every map and link), and the
// agent says it is not pinned (/healthz 503, loctree_pins_ok 0). When a
// bpffs is mounted there again, the agent pins everything again and is
// healthy.
func TestPinsVanish(t *testing.T) {
	kerneltest.RequireRoot(t)
	cg := kerneltest.Cgroup(t)
	mnt := kerneltest.BPFFS(t)
	dir := filepath.Join(mnt, "loctree")
	kerneltest.Backends(t, []string{"127.0.23.1:9500"})
	topo := filepath.Join(t.TempDir(), "mesh.yaml")
	os.WriteFile(topo, []byte(`services:
- name: pinned
  vip: 127.77.4.1:80
  scopes: [region]
  endpoints:
  - address: 127.0.23.1:9500
    locality: {region: r1}
`), 0o644)
	listen := kerneltest.FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, AgentConfig{Topology: topo, Cgroup: cg, BPFFS: dir, Listen: listen,
			Locality: shared.Locality{"region": "r1"}, Watch: 50 * time.Millisecond})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		Uninstall(cg, dir)
	}()
	healthz := func(want int) func() error {
		return func() error {
			resp, err := http.Get("http://" + listen + "/healthz")
			if err != nil {
				return err
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != want {
				return fmt.Errorf("/healthz %d %q, want %d", resp.StatusCode, body, want)
			}
			return nil
		}
	}
	kerneltest.Eventually(t, 10*time.Second, "agent healthy", healthz(http.StatusOK))
	if err := syscall.Unmount(mnt, syscall.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	kerneltest.Eventually(t, 10*time.Second, "agent reports the lost pins", healthz(http.StatusServiceUnavailable))
	if got, err := kerneltest.Ask("127.77.4.1:80"); err != nil || got != "127.0.23.1:9500" {
		t.Fatalf("connect with the bpffs gone: %q, %v; the agent's own references keep the kernel path", got, err)
	}
	if m := metrics(t, listen); !strings.Contains(m, "\nloctree_pins_ok 0\n") {
		t.Fatalf("/metrics without pins:\n%s", m)
	}
	if err := syscall.Mount("bpf", mnt, "bpf", 0, ""); err != nil {
		t.Fatal(err)
	}
	kerneltest.Eventually(t, 10*time.Second, "agent pins again", healthz(http.StatusOK))
	for _, name := range []string{"lt_frontends", "lt_endpoints", "link_lt_connect4", "link_lt_sock_release", mapGeneration} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("after the remount: %v", err)
		}
	}
}

func metrics(t *testing.T, listen string) string {
	t.Helper()
	resp, err := http.Get("http://" + listen + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
