package xds

import (
	"testing"

	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/internal/testing/realcp"
)

// controlPlane is the real etcd and kube-apiserver of this test binary,
// started by the first test that needs it; each test starts its own istiod
// on it (realcp.StartIstiod).
var controlPlane realcp.Lazy

// TestMain runs the tests in a network namespace of their own (the agent
// test attaches BPF programs; the control plane and istiod, started from
// inside it, listen in it too) and stops the control plane after them.
func TestMain(m *testing.M) { kerneltest.Main(realcp.StopAfter(m, &controlPlane)) }
