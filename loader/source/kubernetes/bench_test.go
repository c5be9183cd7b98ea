package kubernetes

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// BenchmarkTreeServices: one 2-port Service with 1,000 endpoints in 10
// slices on 50 nodes turned into its tree services.
func BenchmarkTreeServices(b *testing.B) {
	svc := service("ns", "s", "PreferClose", []string{"127.77.0.1"}, 80, 8080)
	set, _, _ := serviceSettings(svc, policyInput{})
	var sls []*discoveryv1.EndpointSlice
	for i := range 10 {
		var eps []ep
		for j := range 100 {
			eps = append(eps, ep{addr: fmt.Sprintf("127.2.%d.%d", i, j+1), node: fmt.Sprintf("n%d", (i*100+j)%50)})
		}
		sls = append(sls, slice("ns", "s", fmt.Sprintf("s-%d", i), discoveryv1.AddressTypeIPv4, eps, 1080, 9080))
	}
	labels := map[string]map[string]string{}
	for n := range 50 {
		labels[fmt.Sprintf("n%d", n)] = zoneLabels("r1", fmt.Sprintf("z%d", n%3), "", "net1")
	}
	in := &treeInput{svc: svc, settings: set, slices: sls, domain: "cluster.local", clusterID: "c1",
		labels: func(n string) map[string]string { return labels[n] }}
	b.ReportAllocs()
	for b.Loop() {
		treeServices(in, map[string]struct{}{})
	}
}

// BenchmarkSyncOneService: in a cluster of 200 managed Services (400 tree
// services, 20,000 endpoints), the cost of one debounced sync after one
// Service changed: recompute it, diff it, assemble the Update.
func BenchmarkSyncOneService(b *testing.B) {
	var objs []runtime.Object
	for i := range 200 {
		svc := service("ns", fmt.Sprintf("s%d", i), "PreferClose", []string{fmt.Sprintf("127.77.%d.%d", i/250, i%250+1)}, 80, 8080)
		var eps []ep
		for j := range 50 {
			eps = append(eps, ep{addr: fmt.Sprintf("127.3.%d.%d", i, j+1), node: fmt.Sprintf("n%d", j%20)})
		}
		objs = append(objs, svc, slice("ns", svc.Name, svc.Name+"-1", discoveryv1.AddressTypeIPv4, eps, 1080, 9080))
	}
	for n := range 20 {
		objs = append(objs, node(fmt.Sprintf("n%d", n), zoneLabels("r1", fmt.Sprintf("z%d", n%3), "", "net1")))
	}
	src, err := New(Config{Client: newClient(objs...), NodeName: "n0", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer src.informers.stop()
	defer cancel()
	src.informers.start(ctx)
	if err := src.informers.waitForSync(ctx); err != nil {
		b.Fatal(err)
	}
	src.events = newEventSink(src.cfg.Client, "n0")
	defer src.events.shutdown()
	src.state = newState()
	src.mark(func(d *dirtySet) { d.all = true })
	if u, ok := src.sync(); !ok || len(u.Topology.Services) != 400 {
		b.Fatalf("first sync: %v services", len(u.Topology.Services))
	}
	b.ReportAllocs()
	for b.Loop() {
		src.markService("ns/s7")
		src.sync()
	}
}
