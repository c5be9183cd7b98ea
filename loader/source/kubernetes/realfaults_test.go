package kubernetes

import (
	"context"
	"fmt"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/loctree/loctree/internal/testing/realcp"
	"github.com/loctree/loctree/internal/testing/syncbuf"
)

// convergeBudget is how long after the API server's /readyz a change may
// take to reach the tree (issue 22): a node agent's informers must not
// back off for long from the one server they need.
const convergeBudget = 3 * time.Second

// outageLength is how long the API server stays down: long enough that
// client-go's default retries (0.8 s doubling) have grown to several
// seconds, as in a real restart or upgrade.
const outageLength = 10 * time.Second

// TestRealServerRestart kills kube-apiserver twice within two minutes
// while the source runs. During each outage the source keeps its last
// tree (no update drops or empties the Service); once the restarted
// server answers /readyz, a change written then reaches the tree within
// convergeBudget, the second time too.
func TestRealServerRestart(t *testing.T) {
	cp := realcp.StartPrivate(t, realcp.Options{})
	r := &realServer{cp: cp, ns: cp.Namespace(t), admin: k8s.NewForConfigOrDie(cp.Admin())}
	r.node(t, "a", zoneLabels("r1", "z1", "s1", "net1"))
	r.create(t, realService("reviews", "PreferClose"))
	r.create(t, restartSlice(0))
	var log syncbuf.Buffer
	c := runFromKubeconfig(t, kubeconfig(t, cp.Admin()), r.ns+"-a", &log)
	c.waitFor(t, 0, "reviews with one endpoint", r.endpointCount(1))
	for round := 1; round <= 2; round++ {
		n := c.count()
		took := r.outage(t, c, round)
		t.Logf("outage %d: change at /readyz reached the tree %v later", round, took.Round(time.Millisecond))
		if took > convergeBudget {
			t.Errorf("outage %d: converged %v after /readyz, want ≤ %v", round, took.Round(time.Millisecond), convergeBudget)
		}
		r.checkKept(t, c.since(n), round)
	}
}

// outage kills the API server for outageLength, restarts it, writes one
// more EndpointSlice as soon as it is ready, and returns how long after
// /readyz the tree had it.
func (r *realServer) outage(t *testing.T, c *collector, round int) time.Duration {
	t.Helper()
	r.cp.KillAPIServer()
	time.Sleep(outageLength)
	ready, err := r.cp.StartAPIServer(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := c.count()
	eventually(t, 10*time.Second, "the slice written", func() bool {
		_, err := r.admin.DiscoveryV1().EndpointSlices(r.ns).Create(context.Background(), restartSlice(round), metav1.CreateOptions{})
		return err == nil
	})
	c.waitFor(t, n, fmt.Sprintf("reviews with %d endpoints", round+1), r.endpointCount(round+1))
	return time.Since(ready)
}

// restartSlice is the i-th one-endpoint slice of reviews.
func restartSlice(i int) *discoveryv1.EndpointSlice {
	return realSlice("reviews", fmt.Sprintf("reviews-%d", i), discoveryv1.AddressTypeIPv4,
		[]realEP{{addr: fmt.Sprintf("192.0.2.%d", i+1), ready: ptr.To(true)}})
}

func (r *realServer) endpointCount(n int) func(Update) bool {
	return func(u Update) bool {
		s, ok := findService(u, r.fqdn("reviews"))
		return ok && len(s.Endpoints) == n
	}
}

// checkKept: every update around an outage still has reviews with at
// least the endpoints it had before.
func (r *realServer) checkKept(t *testing.T, ups []Update, round int) {
	t.Helper()
	for _, u := range ups {
		if s, ok := findService(u, r.fqdn("reviews")); !ok || len(s.Endpoints) < round {
			t.Errorf("outage %d: an update has reviews %v with %d endpoints, had %d before", round, ok, len(s.Endpoints), round)
		}
	}
}
