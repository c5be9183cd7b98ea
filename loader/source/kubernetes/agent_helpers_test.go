package kubernetes

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/loader"
)

// RunAgent runs the real agent (loader.Run) with cfg until the test ends,
// and fails the test when it returns an error. Exported for the
// kubernetes_test files.
func RunAgent(t *testing.T, cfg loader.AgentConfig) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- loader.Run(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
	})
}

// awaitServices waits until the agent at listen serves a tree of n services.
func awaitServices(t *testing.T, listen string, n int, within time.Duration) {
	t.Helper()
	kerneltest.Eventually(t, within, "every service installed", func() error {
		if got := servedServices(listen); got != n {
			return fmt.Errorf("%d services served", got)
		}
		return nil
	})
}

// awaitNewTree waits until the agent at listen serves a tree other than
// the one of ETag before, and returns how long that took since changed.
func awaitNewTree(t *testing.T, listen, before string, changed time.Time, what string) time.Duration {
	t.Helper()
	for etag(listen) == before {
		if time.Since(changed) > 20*time.Second {
			t.Fatalf("%s not served after 20s", what)
		}
		time.Sleep(200 * time.Microsecond)
	}
	return time.Since(changed)
}

// askLands connects to vip:80 three times and wants every connect to reach
// one of want.
func askLands(t *testing.T, vip string, want []string, what string) {
	t.Helper()
	for range 3 {
		if got, err := kerneltest.Ask(vip + ":80"); err != nil || !slices.Contains(want, got) {
			t.Fatalf("%s: a connect to %s reached %q (%v), want one of %d endpoints", what, vip, got, err, len(want))
		}
	}
}

// percentiles sorts l and returns its median, 99th percentile and maximum.
func percentiles(l []time.Duration) (p50, p99, max time.Duration) {
	slices.Sort(l)
	return l[len(l)/2], l[min(len(l)-1, len(l)*99/100)], l[len(l)-1]
}
