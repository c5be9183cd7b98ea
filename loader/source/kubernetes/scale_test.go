package kubernetes

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/loader"
	"github.com/loctree/loctree/shared"
)

// TestAgentScaleKubernetes is issue 15's scale test through the fake
// Kubernetes API: the real agent (loader.Run with this source) on 1,000
// Services of 100 endpoints (100,000), then 200 random EndpointSlice
// replacements; after each, connects to the Service's VIP land only on its
// new endpoints. The latency from the API update to the new tree (served
// after it is in the kernel) is measured per change, debounce included.
func TestAgentScaleKubernetes(t *testing.T) {
	kerneltest.RequireRoot(t)
	services, changes, perSvc := 1000, 200, 100
	if raceEnabled {
		services, changes = 100, 20
	}
	var objs []runtime.Object
	for n := range 27 {
		objs = append(objs, node(fmt.Sprintf("n%d", n), zoneLabels(fmt.Sprintf("r%d", n%3), fmt.Sprintf("z%d", n%9), fmt.Sprintf("s%d", n), "net1")))
	}
	for s := range services {
		objs = append(objs, service("default", scaleName(s), "PreferClose", []string{scaleVIP(s)}, 80), scaleSlice(s, 0, perSvc))
	}
	client := newClient(objs...)
	const debounce = 10 * time.Millisecond
	src, err := New(Config{Client: client, NodeName: "n0", ClusterID: "c1", Debounce: debounce, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	listen := kerneltest.FreeAddr(t)
	cfg := loader.AgentConfig{Source: src, Cgroup: kerneltest.Cgroup(t), BPFFS: kerneltest.BPFFS(t), Listen: listen}
	start := time.Now()
	RunAgent(t, cfg)
	awaitServices(t, listen, services, 120*time.Second)
	t.Logf("%d Services, %d endpoints: served %v after start", services, services*perSvc, time.Since(start))
	rng := rand.New(rand.NewPCG(15, 17))
	var lat []time.Duration
	for v := 1; v <= changes; v++ {
		s := rng.IntN(services)
		sl := scaleSlice(s, v, perSvc)
		want := make([]string, 0, perSvc)
		for _, e := range sl.Endpoints {
			want = append(want, net.JoinHostPort(e.Addresses[0], "1080"))
		}
		stop := listenAll(t, want)
		before := etag(listen)
		if _, err := client.DiscoveryV1().EndpointSlices("default").Update(context.Background(), sl, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		what := fmt.Sprintf("change %d of Service %d", v, s)
		lat = append(lat, awaitNewTree(t, listen, before, time.Now(), what))
		askLands(t, scaleVIP(s), want, what)
		stop()
	}
	p50, p99, worst := percentiles(lat)
	t.Logf("EndpointSlice change → kernel over %d changes (debounce %v included): p50 %v, p99 %v, max %v", changes, debounce, p50, p99, worst)
	if p50 > time.Second {
		t.Errorf("p50 %v: a one-service change must not cost a whole rebuild (budget 50 ms after the debounce)", p50)
	}
}

func scaleName(s int) string { return fmt.Sprintf("svc-%04d", s) }

func scaleVIP(s int) string { return fmt.Sprintf("127.77.%d.%d", s/250, s%250+1) }

// scaleSlice is Service s's one EndpointSlice in version v: its addresses
// never repeat across versions.
func scaleSlice(s, v, n int) *discoveryv1.EndpointSlice {
	eps := make([]ep, n)
	for i := range eps {
		k := s*n + i
		addr := fmt.Sprintf("127.%d.%d.%d", 1+k>>16, k>>8&0xff, k&0xff)
		if v > 0 {
			addr = fmt.Sprintf("127.%d.%d.%d", 100+v%100, 1+v/100, i+1)
		}
		eps[i] = ep{addr: addr, node: fmt.Sprintf("n%d", i%27), ready: healthy(true)}
	}
	return slice("default", scaleName(s), scaleName(s)+"-1", discoveryv1.AddressTypeIPv4, eps, 1080)
}

// listenAll accepts on every address and answers with it, until the
// returned function or the test's end closes the listeners.
func listenAll(t *testing.T, addrs []string) func() {
	var lns []net.Listener
	stop := func() {
		for _, ln := range lns {
			ln.Close()
		}
	}
	t.Cleanup(stop)
	for _, a := range addrs {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Write([]byte(a))
				c.Close()
			}
		}()
	}
	return stop
}

// etag is the ETag of the tree the agent serves ("" before it serves one).
func etag(listen string) string {
	resp, err := http.Head("http://" + listen + "/v1/tree")
	if err != nil {
		return ""
	}
	resp.Body.Close()
	return resp.Header.Get("ETag")
}

func servedServices(listen string) int {
	resp, err := http.Get("http://" + listen + "/v1/tree")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	tree, err := shared.Decode(body)
	if err != nil {
		return 0
	}
	return tree.NumServices()
}
