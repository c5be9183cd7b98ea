package kubernetes

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/loctree/loctree/internal/testing/realcp"
	"github.com/loctree/loctree/internal/testing/syncbuf"
)

// TestRealServerWatchStalls puts a proxy between the source and the API
// server and blackholes it: the source's connection goes silent without
// closing, and new connections are refused. A slice written meanwhile
// cannot arrive. The source must notice within stallNoticed (its HTTP/2
// health check; client-go's default would take 45 s) and watchGap (plus
// 5 s of slack for a loaded machine: 16.0 s measured against 21 s), say so in Health
// (the agent's /healthz and loctree_source_up), keep its last tree, and
// once the network heals have the slice within convergeBudget, its tree
// equal to the API server's state.
func TestRealServerWatchStalls(t *testing.T) {
	r := onRealServer(t)
	proxy, err := realcp.StartProxy(strings.TrimPrefix(r.cp.Host(), "https://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	viaProxy := r.cp.Admin()
	viaProxy.Host = "https://" + proxy.Addr()
	r.node(t, "a", zoneLabels("r1", "z1", "s1", "net1"))
	r.create(t, realService("reviews", "PreferClose"))
	r.create(t, restartSlice(0))
	var log syncbuf.Buffer
	c := runFromKubeconfig(t, kubeconfig(t, viaProxy), r.ns+"-a", &log)
	c.waitFor(t, 0, "reviews with one endpoint", r.endpointCount(1))
	n := c.count()

	stalled := time.Now()
	proxy.Blackhole()
	r.create(t, restartSlice(1))
	eventually(t, stallNoticed+watchGap+5*time.Second, "the source reporting the stalled watch", func() bool { return c.src.Health() != nil })
	t.Logf("stall noticed %v after the blackhole: %v", time.Since(stalled).Round(time.Millisecond), c.src.Health())
	if got := c.since(n); len(got) > 0 {
		t.Errorf("%d updates while the API server was unreachable, want none (the last tree kept)", len(got))
	}

	proxy.Heal()
	healed := time.Now()
	want := "192.0.2.1:19080 true, 192.0.2.2:19080 true"
	c.waitFor(t, n, "reviews with "+want, func(u Update) bool {
		s, _ := findService(u, r.fqdn("reviews"))
		return endpointStates(s) == want
	})
	took := time.Since(healed)
	t.Logf("healed: the slice written during the stall in the tree %v later", took.Round(time.Millisecond))
	if took > convergeBudget {
		t.Errorf("converged %v after the network healed, want ≤ %v", took.Round(time.Millisecond), convergeBudget)
	}
	eventually(t, 5*time.Second, "the source healthy again", func() bool { return c.src.Health() == nil })
	if ups := c.since(n); !maps.Equal(r.treeReadiness(ups[len(ups)-1]), r.storedReadiness(t)) {
		t.Errorf("the last tree %v differs from the API's state %v", r.treeReadiness(ups[len(ups)-1]), r.storedReadiness(t))
	}
}
