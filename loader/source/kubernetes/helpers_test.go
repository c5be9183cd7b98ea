package kubernetes

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/loctree/loctree/shared"
)

// collector keeps every update a running Source published.
type collector struct {
	mu      sync.Mutex
	updates []Update
	ch      chan struct{}
	src     *Source // the running source
}

func (c *collector) publish(u Update) error {
	c.mu.Lock()
	c.updates = append(c.updates, u)
	c.mu.Unlock()
	select {
	case c.ch <- struct{}{}:
	default:
	}
	return nil
}

func (c *collector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.updates)
}

func (c *collector) since(n int) []Update {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Update(nil), c.updates[n:]...)
}

// waitFor waits until an update published after the first `after` updates
// satisfies ok, and returns it.
func (c *collector) waitFor(t *testing.T, after int, what string, ok func(Update) bool) Update {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		for _, u := range c.since(after) {
			if ok(u) {
				return u
			}
		}
		select {
		case <-c.ch:
		case <-deadline:
			var names []string
			if ups := c.since(0); len(ups) > 0 {
				for _, s := range ups[len(ups)-1].Topology.Services {
					names = append(names, fmt.Sprintf("%s(%d endpoints)", s.Name, len(s.Endpoints)))
				}
			}
			t.Fatalf("timed out waiting for %s; last update's services: %v", what, names)
		}
	}
}

// run starts a Source on client and stops it when the test ends.
func run(t *testing.T, client *fake.Clientset, node string) *collector {
	t.Helper()
	return collect(t, Config{Client: client, NodeName: node})
}

// collect runs a Source of cfg, in cluster c1 with the tests' debounce and
// hold, until the test ends, and keeps every update it publishes. Run must
// return nil.
func collect(t testing.TB, cfg Config) *collector {
	t.Helper()
	return collectWith(t, cfg, func(err error) bool { return err == nil })
}

// collectWith is collect where Run's result must satisfy ok.
func collectWith(t testing.TB, cfg Config, ok func(error) bool) *collector {
	t.Helper()
	cfg.ClusterID, cfg.Debounce, cfg.MaxDelay = "c1", 5*time.Millisecond, 50*time.Millisecond
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	src, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{ch: make(chan struct{}, 1), src: src}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, c.publish) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !ok(err) {
			t.Errorf("Run: %v", err)
		}
	})
	return c
}

func newClient(objs ...runtime.Object) *fake.Clientset { return fake.NewClientset(objs...) }

func node(name string, labels map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func zoneLabels(region, zone, subzone, network string) map[string]string {
	l := map[string]string{}
	for k, v := range map[string]string{LabelRegion: region, LabelZone: zone, LabelSubzone: subzone, LabelNetwork: network} {
		if v != "" {
			l[k] = v
		}
	}
	return l
}

// service is a ClusterIP Service with TCP ports named p<port> targeting port+1000.
func service(ns, name, td string, clusterIPs []string, ports ...int32) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.ServiceSpec{ClusterIPs: clusterIPs},
	}
	if len(clusterIPs) > 0 {
		svc.Spec.ClusterIP = clusterIPs[0]
	}
	if td != "" {
		svc.Spec.TrafficDistribution = ptr.To(td)
	}
	for _, p := range ports {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{
			Name: fmt.Sprintf("p%d", p), Port: p, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(p + 1000),
		})
	}
	return svc
}

// ep is an endpoint of a test slice.
type ep struct {
	addr, node, zone          string
	ready, serving, terminate *bool
}

// slice is an EndpointSlice of svc with the given target ports (named p<port-1000>).
func slice(ns, svc, name string, typ discoveryv1.AddressType, eps []ep, targetPorts ...int32) *discoveryv1.EndpointSlice {
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: typ,
	}
	for _, tp := range targetPorts {
		sl.Ports = append(sl.Ports, discoveryv1.EndpointPort{
			Name: ptr.To(fmt.Sprintf("p%d", tp-1000)), Port: ptr.To(tp), Protocol: ptr.To(corev1.ProtocolTCP),
		})
	}
	for _, e := range eps {
		d := discoveryv1.Endpoint{Addresses: []string{e.addr}, Conditions: discoveryv1.EndpointConditions{
			Ready: e.ready, Serving: e.serving, Terminating: e.terminate,
		}}
		if e.node != "" {
			d.NodeName = ptr.To(e.node)
		}
		if e.zone != "" {
			d.Zone = ptr.To(e.zone)
		}
		sl.Endpoints = append(sl.Endpoints, d)
	}
	return sl
}

var ctx = context.Background()

func findService(u Update, name string) (shared.ServiceSpec, bool) {
	for _, s := range u.Topology.Services {
		if s.Name == name {
			return s, true
		}
	}
	return shared.ServiceSpec{}, false
}

func hasSpec(name string, want shared.ServiceSpec) func(Update) bool {
	return func(u Update) bool {
		got, ok := findService(u, name)
		return ok && reflect.DeepEqual(got, want)
	}
}

func healthy(b bool) *bool { return &b }

func asObjects(objs []any, nodes []*corev1.Node) []runtime.Object {
	var out []runtime.Object
	for _, o := range objs {
		out = append(out, o.(runtime.Object))
	}
	for _, n := range nodes {
		out = append(out, n)
	}
	return out
}

// waitWithin reports whether an update satisfying ok arrives within d.
func (c *collector) waitWithin(d time.Duration, ok func(Update) bool) bool {
	deadline := time.After(d)
	for {
		for _, u := range c.since(0) {
			if ok(u) {
				return true
			}
		}
		select {
		case <-c.ch:
		case <-deadline:
			return false
		}
	}
}
