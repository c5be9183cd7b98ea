package loader

import (
	"log/slog"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Item 4 of issue 9: a FIFO at the topology path never blocks the agent,
// neither at start nor in the watcher (whose loop also waits for shutdown).
// No kernel needed: only the file reading runs.
func TestReliabilityAgentTopologyFIFO(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mesh.yaml")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	a := &agent{cfg: AgentConfig{Topology: path}, log: slog.New(slog.DiscardHandler), metrics: newMetrics()}
	done := make(chan error, 1)
	go func() {
		a.reload()
		_, _, err := a.read()
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("read: error %v, want not a regular file", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the agent blocked on a FIFO for 2s")
	}
}
