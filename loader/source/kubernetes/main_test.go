package kubernetes

import (
	"testing"

	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/internal/testing/realcp"
)

// controlPlane is the real etcd and kube-apiserver of this test binary,
// started by the first test that needs it (realcp_test.go).
var controlPlane realcp.Lazy

// TestMain runs the kernel tests in a network namespace of their own (the
// control plane, started from inside it, listens in it too) and stops the
// control plane after the tests.
func TestMain(m *testing.M) { kerneltest.Main(realcp.StopAfter(m, &controlPlane)) }
