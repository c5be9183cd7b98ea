package xds

import (
	"os"
	"testing"

	"github.com/loctree/loctree/internal/testing/realcp"
)

// controlPlane is the real etcd and kube-apiserver of this test binary,
// started by the first test that needs it; each test starts its own istiod
// on it (realcp.StartIstiod).
var controlPlane realcp.Lazy

func TestMain(m *testing.M) { os.Exit(realcp.StopAfter(m, &controlPlane).Run()) }
