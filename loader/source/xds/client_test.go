package xds

import (
	"bytes"
	"context"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loctree/loctree/internal/testing/realcp"
	"github.com/loctree/loctree/loader/source"

	"github.com/loctree/loctree/loader/source/xds/internal/workloadapi"
)

// TestNackNamesTheResourceAndAppliesTheRest: a response with a workload
// whose address is 5 bytes long and a service with an UNSPECIFIED_SCOPE
// routing preference (both errors in ztunnel's TryFrom, src/state/
// workload.rs byte_to_ip and src/state/service.rs) among good resources is
// NACKed with the response's nonce and an error_detail naming both, the
// good resources are published, and the next response is ACKed (ztunnel
// src/xds/client.rs handle_stream_event).
func TestNackNamesTheResourceAndAppliesTheRest(t *testing.T) {
	f := startFakeADS(t)
	src, updates := runSource(t, f.addr)
	st := f.stream(t)
	init := f.request(t)
	if init.GetTypeUrl() != AddressType || len(init.GetResourceNamesSubscribe()) != 0 || !strings.HasPrefix(init.GetNode().GetId(), "ztunnel~") {
		t.Fatalf("initial request: %v", init)
	}
	bad := wdsWorkload("Kubernetes//Pod/ns/bad", "100.64.0.9", "node-a", "z1", "ns/a.ns.svc.cluster.local", 8080, true)
	bad.GetWorkload().Addresses = [][]byte{{1, 2, 3, 4, 5}}
	badSvc := wdsService("c", "127.0.10.3", workloadapi.LoadBalancing_UNSPECIFIED_SCOPE)
	st.send <- &discoveryv3.DeltaDiscoveryResponse{TypeUrl: AddressType, Nonce: "n1", SystemVersionInfo: "v1", Resources: []*discoveryv3.Resource{
		resource(t, "ns/a.ns.svc.cluster.local", "1", wdsService("a", "127.0.10.1", workloadapi.LoadBalancing_ZONE)),
		resource(t, "Kubernetes//Pod/ns/a1", "1", wdsWorkload("Kubernetes//Pod/ns/a1", "100.64.0.1", "node-a", "z1", "ns/a.ns.svc.cluster.local", 8080, true)),
		resource(t, "Kubernetes//Pod/ns/bad", "1", bad),
		resource(t, "ns/c.ns.svc.cluster.local", "1", badSvc),
	}}
	nack := f.request(t)
	if nack.GetResponseNonce() != "n1" || nack.GetErrorDetail() == nil {
		t.Fatalf("want a NACK of n1, got %v", nack)
	}
	for _, want := range []string{"Kubernetes//Pod/ns/bad: workload Kubernetes//Pod/ns/bad: an address of 5 bytes", "ns/c.ns.svc.cluster.local: service ns/c.ns.svc.cluster.local: load_balancing: invalid routing preference UNSPECIFIED_SCOPE"} {
		if !strings.Contains(nack.GetErrorDetail().GetMessage(), want) {
			t.Errorf("error_detail %q does not say %q", nack.GetErrorDetail().GetMessage(), want)
		}
	}
	u := nextUpdate(t, updates)
	sp, err := u.Services.Spec("a.ns.svc.cluster.local")
	if err != nil || len(sp.Endpoints) != 1 || sp.Endpoints[0].Address != "100.64.0.1:8080" {
		t.Fatalf("the good service: %+v, %v", sp, err)
	}
	st.send <- &discoveryv3.DeltaDiscoveryResponse{TypeUrl: AddressType, Nonce: "n2", Resources: []*discoveryv3.Resource{
		resource(t, "Kubernetes//Pod/ns/a2", "1", wdsWorkload("Kubernetes//Pod/ns/a2", "100.64.0.2", "node-b", "z2", "ns/a.ns.svc.cluster.local", 8080, true)),
	}}
	if ack := f.request(t); ack.GetResponseNonce() != "n2" || ack.GetErrorDetail() != nil {
		t.Fatalf("want an ACK of n2, got %v", ack)
	}
	var m bytes.Buffer
	if err := src.WriteMetrics(&m); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"loctree_xds_nacks_total 1\n", `loctree_xds_last_acked{version="",nonce="n2"} 1`, "loctree_xds_workloads 2\n", "loctree_xds_services 1\n", "loctree_xds_connected 1\n"} {
		if !strings.Contains(m.String(), want) {
			t.Errorf("metrics do not say %q:\n%s", want, m.String())
		}
	}
}

// TestReconnectResumesWithVersions: after the stream ends, the client
// reconnects and its initial request names every resource it holds with
// the version last received (initial_resource_versions, ztunnel's
// known_resources) and not the rejected one; a removal in the new
// stream's first response removes the service from the tree, and what was
// not resent stays (no service flaps to empty).
func TestReconnectResumesWithVersions(t *testing.T) {
	f := startFakeADS(t)
	_, updates := runSource(t, f.addr)
	st := f.stream(t)
	f.request(t)
	st.send <- &discoveryv3.DeltaDiscoveryResponse{TypeUrl: AddressType, Nonce: "n1", Resources: []*discoveryv3.Resource{
		resource(t, "ns/a.ns.svc.cluster.local", "va", wdsService("a", "127.0.10.1", workloadapi.LoadBalancing_ZONE)),
		resource(t, "ns/b.ns.svc.cluster.local", "vb", wdsService("b", "127.0.10.2", workloadapi.LoadBalancing_ZONE)),
		resource(t, "Kubernetes//Pod/ns/a1", "v1", wdsWorkload("Kubernetes//Pod/ns/a1", "100.64.0.1", "node-a", "z1", "ns/a.ns.svc.cluster.local", 8080, true)),
		{Name: "junk", Version: "vj", Resource: &anypb.Any{TypeUrl: AddressType, Value: []byte{0xff}}},
	}}
	f.request(t) // the NACK of junk
	first := nextUpdate(t, updates)
	if !slices.Equal(first.Changed, []string{"a.ns.svc.cluster.local", "b.ns.svc.cluster.local"}) {
		t.Fatalf("first update: %v", first.Changed)
	}
	close(st.end)
	st = f.stream(t)
	init := f.request(t)
	want := map[string]string{"ns/a.ns.svc.cluster.local": "va", "ns/b.ns.svc.cluster.local": "vb", "Kubernetes//Pod/ns/a1": "v1"}
	if !maps.Equal(init.GetInitialResourceVersions(), want) {
		t.Fatalf("initial_resource_versions %v, want %v", init.GetInitialResourceVersions(), want)
	}
	st.send <- &discoveryv3.DeltaDiscoveryResponse{TypeUrl: AddressType, Nonce: "n2", RemovedResources: []string{"ns/b.ns.svc.cluster.local"}}
	f.request(t)
	u := nextUpdate(t, updates)
	if !slices.Equal(u.Changed, []string{"b.ns.svc.cluster.local"}) || u.Services.Has("b.ns.svc.cluster.local") || !u.Services.Has("a.ns.svc.cluster.local") {
		t.Fatalf("after the removal: changed %v", u.Changed)
	}
}

// TestBackoff: while every connection fails (a listener that accepts and
// closes at once), the client tries again after a jittered wait that
// doubles from InitialBackoff to MaxBackoff: each gap is at least half the
// step's backoff, and the attempts keep coming at the cap (each attempt
// dials anew, so gRPC's own 1 s connection backoff never holds them back).
func TestBackoff(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepts := make(chan time.Time, 1000)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			accepts <- time.Now()
			conn.Close()
		}
	}()
	const initial, max = 20 * time.Millisecond, 80 * time.Millisecond
	s, err := New(Config{Address: ln.Addr().String(), NodeName: "n", InitialBackoff: initial, MaxBackoff: max, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, func(source.Update) error { return nil }) }()
	time.Sleep(1500 * time.Millisecond)
	cancel()
	<-done
	var times []time.Time
	for len(accepts) > 0 {
		times = append(times, <-accepts)
	}
	// Waits of at most 20+40+80+80+… ms: 10 attempts take at most 620 ms of
	// them, leaving 880 ms for the attempts themselves on a loaded machine.
	if len(times) < 10 {
		t.Fatalf("%d connection attempts in 1.5 s, want at least 10 (backoff %v doubling to %v)", len(times), initial, max)
	}
	b := initial
	for i := 1; i < len(times); i++ { // the wait before attempt i is drawn from [b/2, b]
		if gap := times[i].Sub(times[i-1]); gap < b/2-2*time.Millisecond {
			t.Errorf("attempt %d came %v after the last, want at least %v (half of %v)", i, gap, b/2, b)
		}
		b = min(2*b, max)
	}
}

// TestSilencedConnectionReconnects: a connection to istiod that a network
// silences (no FIN, no RST: realcp.Proxy's blackhole) is noticed by the
// keepalive ping going unanswered, and the client connects again and
// resumes, instead of keeping its last state until TCP gives up. Without
// the keepalive no new stream comes in 25 s.
func TestSilencedConnectionReconnects(t *testing.T) {
	f := startFakeADS(t)
	p, err := realcp.StartProxy(f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// gRPC pings no more often than every 10 s.
	s, updates := runSourceWith(t, Config{Address: p.Addr(), KeepaliveTime: 10 * time.Second, KeepaliveTimeout: time.Second})
	st := f.stream(t)
	f.request(t)
	st.send <- &discoveryv3.DeltaDiscoveryResponse{TypeUrl: AddressType, Nonce: "n1", Resources: []*discoveryv3.Resource{
		resource(t, "ns/a.ns.svc.cluster.local", "va", wdsService("a", "127.0.10.1", workloadapi.LoadBalancing_ZONE)),
	}}
	f.request(t) // ACK
	nextUpdate(t, updates)
	p.Blackhole()
	p.Heal() // new connections pass again; the established one stays silent
	silenced := time.Now()
	select {
	case <-f.streams:
	case <-time.After(25 * time.Second):
		t.Fatal("no new stream within 25 s of the connection going silent")
	}
	t.Logf("reconnected %s after the connection went silent", time.Since(silenced).Round(time.Millisecond))
	if init := f.request(t); init.GetInitialResourceVersions()["ns/a.ns.svc.cluster.local"] != "va" {
		t.Fatalf("the new stream does not resume: %v", init.GetInitialResourceVersions())
	}
	if err := s.Health(); err != nil {
		t.Logf("health while resuming: %v", err)
	}
}
