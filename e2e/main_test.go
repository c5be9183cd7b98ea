package e2e

import (
	"os"
	"testing"

	"github.com/loctree/loctree/internal/testing/kerneltest"
)

// TestMain runs the kernel tests in a network namespace of their own; with
// relayEnv set, the binary is a load test's relay to a VIP instead.
func TestMain(m *testing.M) {
	if vip := os.Getenv(relayEnv); vip != "" {
		os.Exit(relay(vip))
	}
	kerneltest.Main(m)
}
