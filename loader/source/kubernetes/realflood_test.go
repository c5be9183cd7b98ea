package kubernetes

import (
	"context"
	"fmt"
	"io"
	"maps"
	"sync"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Flood: floodServices Services of floodEndpoints endpoints each, one
// EndpointSlice per Service, and floodWrites updates of those slices sent
// as fast as the server takes them.
const (
	floodServices  = 10
	floodEndpoints = 10
	floodWrites    = 1000
)

// TestRealServerFlood sends 1,000 EndpointSlice updates (each flips one
// endpoint's readiness) from 10 writers at once, about a second's worth
// (measured 0.94–1.58 s), and checks that once they settle the source's last
// tree has every endpoint's readiness exactly as the API server stores it.
func TestRealServerFlood(t *testing.T) {
	r := onRealServer(t)
	r.node(t, "a", zoneLabels("r1", "z1", "", ""))
	slices := make([]*discoveryv1.EndpointSlice, floodServices)
	for s := range floodServices {
		name := fmt.Sprintf("svc%d", s)
		r.create(t, realService(name, "PreferSameZone"))
		var eps []realEP
		for e := range floodEndpoints {
			eps = append(eps, realEP{addr: fmt.Sprintf("192.0.2.%d", s*floodEndpoints+e+1), node: r.ns + "-a", ready: ptr.To(true)})
		}
		slices[s] = r.create(t, realSlice(name, name+"-1", discoveryv1.AddressTypeIPv4, eps)).(*discoveryv1.EndpointSlice)
	}
	c := runFromKubeconfig(t, kubeconfig(t, r.cp.Admin()), r.ns+"-a", io.Discard)
	c.waitFor(t, 0, "every flood service", func(u Update) bool { return len(r.ownServices(u)) == floodServices })
	n := c.count()
	start := time.Now()
	r.flood(t, slices)
	sent := time.Since(start)
	want := r.storedReadiness(t)
	c.waitFor(t, n, "the tree as the API stores it", func(u Update) bool { return maps.Equal(r.treeReadiness(u), want) })
	settled := time.Since(start) - sent
	time.Sleep(500 * time.Millisecond) // an earlier update may have matched by chance: the last must
	if ups := c.since(n); !maps.Equal(r.treeReadiness(ups[len(ups)-1]), want) {
		t.Errorf("the last update differs from the API's state")
	}
	t.Logf("%d updates sent in %v (%.0f/s); the tree as stored %v after the last; %d source updates",
		floodWrites, sent.Round(time.Millisecond), floodWrites/sent.Seconds(), settled.Round(time.Millisecond), c.count()-n)
}

// flood updates the slices from one writer per slice, each flipping the
// readiness of its endpoints in turn, floodWrites updates in all.
func (r *realServer) flood(t *testing.T, slices []*discoveryv1.EndpointSlice) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(slices))
	for _, sl := range slices {
		wg.Go(func() {
			for i := range floodWrites / len(slices) {
				cond := &sl.Endpoints[i%len(sl.Endpoints)].Conditions
				cond.Ready = ptr.To(!*cond.Ready)
				got, err := r.admin.DiscoveryV1().EndpointSlices(r.ns).Update(context.Background(), sl, metav1.UpdateOptions{})
				if err != nil {
					errs <- err
					return
				}
				sl = got
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// storedReadiness is every endpoint's readiness as the API server stores it.
func (r *realServer) storedReadiness(t *testing.T) map[string]bool {
	t.Helper()
	l, err := r.admin.DiscoveryV1().EndpointSlices(r.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, sl := range l.Items {
		for _, e := range sl.Endpoints {
			out[e.Addresses[0]+":19080"] = e.Conditions.Ready == nil || *e.Conditions.Ready
		}
	}
	return out
}

// treeReadiness is every endpoint's health in the test's tree services.
func (r *realServer) treeReadiness(u Update) map[string]bool {
	out := map[string]bool{}
	for _, s := range r.ownServices(u) {
		for _, e := range s.Endpoints {
			out[e.Address] = e.Healthy != nil && *e.Healthy
		}
	}
	return out
}
