package loader

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/loader/kernel"
)

// TestPinsVanish: the bpffs under a running agent is unmounted. The
// kernel path keeps working (the agent holds every map and link), and the
// agent says it is not pinned (/healthz 503, loctree_pins_ok 0). When a
// bpffs is mounted there again, the agent pins everything again and is
// healthy.
func TestPinsVanish(t *testing.T) {
	kerneltest.RequireRoot(t)
	kerneltest.Backends(t, []string{"127.0.23.1:9500"})
	cfg := oneServiceAgent(t, "127.77.4.1:80", "127.0.23.1:9500")
	mnt := kerneltest.BPFFS(t)
	cfg.BPFFS = filepath.Join(mnt, "loctree")
	t.Cleanup(func() { kernel.Uninstall(cfg.Cgroup, cfg.BPFFS) })
	runAgent(t, cfg)
	listen, dir := cfg.Listen, cfg.BPFFS
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
	for _, name := range []string{"lt_frontends", "lt_endpoints", "link_lt_connect4", "link_lt_sock_release", "lt_generation"} {
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
