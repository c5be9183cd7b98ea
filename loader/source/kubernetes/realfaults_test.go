package kubernetes

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/loctree/loctree/internal/testing/realcp"
	"github.com/loctree/loctree/internal/testing/syncbuf"
	"github.com/loctree/loctree/shared"
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
// tree (no update drops or empties the Service) and its Health says the
// server refuses connections (the agent's /healthz and
// loctree_source_up); once the restarted
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
		took := r.outage(t, c, &log, round)
		t.Logf("outage %d: change at /readyz reached the tree %v later", round, took.Round(time.Millisecond))
		if took > convergeBudget {
			t.Errorf("outage %d: converged %v after /readyz, want ≤ %v", round, took.Round(time.Millisecond), convergeBudget)
		}
		r.checkKept(t, c.since(n), round)
	}
}

// outage kills the API server for outageLength, restarts it, writes one
// more EndpointSlice as soon as it is ready, and returns how long after
// /readyz the tree had it. Meanwhile no informer may retry more often than
// retryBackoff allows (checkRetries).
func (r *realServer) outage(t *testing.T, c *collector, log *syncbuf.Buffer, round int) time.Duration {
	t.Helper()
	mark, killed := len(log.String()), time.Now()
	r.cp.KillAPIServer()
	eventually(t, 5*time.Second, "the source reporting the outage", func() bool {
		err := c.src.Health()
		return err != nil && strings.Contains(err.Error(), "connection refused")
	})
	time.Sleep(outageLength)
	down := time.Since(killed) // refused calls end when the restarted server listens
	ready, err := r.cp.StartAPIServer(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	checkRetries(t, log.String()[mark:], down, round)
	n := c.count()
	eventually(t, 10*time.Second, "the slice written", func() bool {
		_, err := r.admin.DiscoveryV1().EndpointSlices(r.ns).Create(context.Background(), restartSlice(round), metav1.CreateOptions{})
		return err == nil
	})
	c.waitFor(t, n, fmt.Sprintf("reviews with %d endpoints", round+1), r.endpointCount(round+1))
	took := time.Since(ready)
	eventually(t, 5*time.Second, "the source healthy again", func() bool { return c.src.Health() == nil })
	return took
}

// checkRetries: in an outage of length d, each informer's failed calls
// (logged "failed; retrying") are at most the 4 that climb to
// retryBackoff's 1 s cap (0.1, 0.2, 0.4, 0.8 s, each up to doubled by
// jitter) plus one a second after it — an agent does not hammer the
// server that 5,000 others also wait for — and at least one every 2 s
// (the cap doubled), less one, so that it is back within the convergence
// budget.
func checkRetries(t *testing.T, log string, d time.Duration, round int) {
	t.Helper()
	counts := map[string]int{}
	for line := range strings.Lines(log) {
		if _, rest, ok := strings.Cut(line, "failed; retrying\" resource="); ok {
			counts[strings.Fields(rest)[0]]++
		}
	}
	most := 4 + int(d/time.Second) + 1
	least := int(d/(2*time.Second)) - 1
	for _, res := range []string{"services", "endpointslices", "nodes", "namespaces"} {
		t.Logf("outage %d (%v): %s retried %d times", round, d.Round(100*time.Millisecond), res, counts[res])
		if counts[res] > most || counts[res] < least {
			t.Errorf("outage %d of %v: %s failed %d calls, want %d..%d (retries 1–2 s apart once at the cap)", round, d.Round(100*time.Millisecond), res, counts[res], least, most)
		}
	}
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

// TestRealServerRelistAfterCompaction: while the source's API server is
// down, a second API server on the same etcd (as in an HA control plane)
// deletes one EndpointSlice of reviews, adds another and marks an endpoint
// not ready, deletes one of ratings' two slices (its only change: seen only
// as a deletion the relist infers), and etcd's history is compacted. The restarted server answers the
// source's watch from its old resource version with 410 Gone (checked
// with a watch of our own), the source lists again, and its tree has
// every missed change, the deletion included, within convergeBudget of
// /readyz; until then it keeps the last tree.
func TestRealServerRelistAfterCompaction(t *testing.T) {
	cp := realcp.StartPrivate(t, realcp.Options{})
	r := &realServer{cp: cp, ns: cp.Namespace(t), admin: k8s.NewForConfigOrDie(cp.Admin())}
	r.node(t, "a", zoneLabels("r1", "z1", "s1", "net1"))
	r.create(t, realService("reviews", "PreferClose"))
	r.create(t, restartSlice(0))
	r.create(t, restartSlice(1))
	r.create(t, realService("ratings", "PreferClose"))
	for i := range 2 {
		r.create(t, realSlice("ratings", fmt.Sprintf("ratings-%d", i), discoveryv1.AddressTypeIPv4, []realEP{{addr: fmt.Sprintf("192.0.2.%d", 10+i)}}))
	}
	c := runFromKubeconfig(t, kubeconfig(t, cp.Admin()), r.ns+"-a", io.Discard)
	c.waitFor(t, 0, "reviews and ratings with two endpoints each", func(u Update) bool {
		s, _ := findService(u, r.fqdn("ratings"))
		return r.endpointCount(2)(u) && len(s.Endpoints) == 2
	})
	old := r.sliceListVersion(t)
	n := c.count()
	cp.KillAPIServer()
	r.changeThroughSecond(t)
	ready, err := cp.StartAPIServer(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// reviews-0 deleted, reviews-1 not ready, reviews-2 added; ratings-0 deleted.
	want := "192.0.2.2:19080 false, 192.0.2.3:19080 true; 192.0.2.11:19080 true"
	c.waitFor(t, n, "the missed changes: "+want, func(u Update) bool {
		s, _ := findService(u, r.fqdn("reviews"))
		ra, _ := findService(u, r.fqdn("ratings"))
		return endpointStates(s)+"; "+endpointStates(ra) == want
	})
	took := time.Since(ready)
	t.Logf("relisted: the missed changes in the tree %v after /readyz", took.Round(time.Millisecond))
	if took > convergeBudget {
		t.Errorf("converged %v after /readyz, want ≤ %v", took.Round(time.Millisecond), convergeBudget)
	}
	r.checkExpired(t, old)
	r.checkKept(t, c.since(n)[:len(c.since(n))-1], 2)
}

// endpointStates lists a tree service's endpoints as "address healthy, ...".
func endpointStates(s shared.ServiceSpec) string {
	var out []string
	for _, e := range s.Endpoints {
		out = append(out, fmt.Sprintf("%s %v", e.Address, e.Healthy != nil && *e.Healthy))
	}
	return strings.Join(out, ", ")
}

// changeThroughSecond makes the changes through a second API server and
// compacts etcd, then stops that server.
func (r *realServer) changeThroughSecond(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	cfg, stop, err := r.cp.StartSecondAPIServer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	second := k8s.NewForConfigOrDie(cfg).DiscoveryV1().EndpointSlices(r.ns)
	for _, name := range []string{"reviews-0", "ratings-0"} {
		if err := second.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	sl := restartSlice(2)
	sl.Namespace = r.ns
	if _, err := second.Create(ctx, sl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	one, err := second.Get(ctx, "reviews-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	one.Endpoints[0].Conditions.Ready = ptr.To(false)
	if _, err := second.Update(ctx, one, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := r.cp.CompactEtcd(ctx); err != nil {
		t.Fatal(err)
	}
}

// sliceListVersion is the resource version of a list of EndpointSlices now.
func (r *realServer) sliceListVersion(t *testing.T) string {
	t.Helper()
	l, err := r.admin.DiscoveryV1().EndpointSlices(r.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l.ResourceVersion
}

// checkExpired: a watch from resource version rv is answered 410 Gone.
func (r *realServer) checkExpired(t *testing.T, rv string) {
	t.Helper()
	admin := k8s.NewForConfigOrDie(r.cp.Admin())
	w, err := admin.DiscoveryV1().EndpointSlices(r.ns).Watch(context.Background(), metav1.ListOptions{ResourceVersion: rv})
	if err == nil {
		defer w.Stop()
		select {
		case ev := <-w.ResultChan():
			err = apierrors.FromObject(ev.Object)
		case <-time.After(5 * time.Second):
		}
	}
	if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
		t.Errorf("watch from the resource version before the compaction (%s): %v, want 410 Gone", rv, err)
	}
}
