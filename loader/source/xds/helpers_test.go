package xds

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/loctree/loctree/loader/source"
	"github.com/loctree/loctree/loader/source/xds/internal/workloadapi"
)

// fakeADS is an in-process delta ADS server: each stream's requests go to
// reqs, and the test sends responses with push. Closing a stream (end)
// makes the client reconnect.
type fakeADS struct {
	discoveryv3.UnimplementedAggregatedDiscoveryServiceServer
	reqs    chan *discoveryv3.DeltaDiscoveryRequest
	streams chan *fakeStream
	addr    string
}

type fakeStream struct {
	send chan *discoveryv3.DeltaDiscoveryResponse
	end  chan struct{}
}

func startFakeADS(t testing.TB) *fakeADS {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeADS{reqs: make(chan *discoveryv3.DeltaDiscoveryRequest, 100), streams: make(chan *fakeStream, 10), addr: ln.Addr().String()}
	// istiod accepts a client's keepalive pings every Time/2 = 15 s
	// (pilot/pkg/grpc/grpc.go); the tests' clients ping every 10 s.
	srv := grpc.NewServer(grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second}))
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(srv, f)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return f
}

func (f *fakeADS) DeltaAggregatedResources(s grpc.BidiStreamingServer[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse]) error {
	fs := &fakeStream{send: make(chan *discoveryv3.DeltaDiscoveryResponse), end: make(chan struct{})}
	f.streams <- fs
	go func() {
		for {
			req, err := s.Recv()
			if err != nil {
				return
			}
			f.reqs <- req
		}
	}()
	for {
		select {
		case r := <-fs.send:
			if err := s.Send(r); err != nil {
				return err
			}
		case <-fs.end:
			return nil
		case <-s.Context().Done():
			return nil
		}
	}
}

func (f *fakeADS) stream(t testing.TB) *fakeStream {
	t.Helper()
	select {
	case s := <-f.streams:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("no stream from the client")
		return nil
	}
}

func (f *fakeADS) request(t testing.TB) *discoveryv3.DeltaDiscoveryRequest {
	t.Helper()
	select {
	case r := <-f.reqs:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no request from the client")
		return nil
	}
}

// resource wraps an Address as a delta resource.
func resource(t testing.TB, name, version string, a *workloadapi.Address) *discoveryv3.Resource {
	t.Helper()
	b, err := proto.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	return &discoveryv3.Resource{Name: name, Version: version, Resource: &anypb.Any{TypeUrl: AddressType, Value: b}}
}

func wdsWorkload(uid, ip, node, zone string, svcKey string, port uint32, healthy bool) *workloadapi.Address {
	st := workloadapi.WorkloadStatus_HEALTHY
	if !healthy {
		st = workloadapi.WorkloadStatus_UNHEALTHY
	}
	return &workloadapi.Address{Type: &workloadapi.Address_Workload{Workload: &workloadapi.Workload{
		Uid: uid, Name: uid, Namespace: "ns", Addresses: [][]byte{netip.MustParseAddr(ip).AsSlice()},
		Node: node, Status: st, ClusterId: "Kubernetes", Capacity: wrapperspb.UInt32(1),
		Locality: &workloadapi.Locality{Region: "r1", Zone: zone},
		Services: map[string]*workloadapi.PortList{svcKey: {Ports: []*workloadapi.Port{{ServicePort: 80, TargetPort: port}}}},
	}}}
}

func wdsService(name, vip string, scopes ...workloadapi.LoadBalancing_Scope) *workloadapi.Address {
	return &workloadapi.Address{Type: &workloadapi.Address_Service{Service: &workloadapi.Service{
		Name: name, Namespace: "ns", Hostname: name + ".ns.svc.cluster.local",
		Addresses:     []*workloadapi.NetworkAddress{{Address: netip.MustParseAddr(vip).AsSlice()}},
		Ports:         []*workloadapi.Port{{ServicePort: 80, TargetPort: 8080}},
		LoadBalancing: &workloadapi.LoadBalancing{RoutingPreference: scopes, Mode: workloadapi.LoadBalancing_FAILOVER},
	}}}
}

// runSource runs a Source against addr; its updates arrive on the channel.
func runSource(t testing.TB, addr string) (*Source, <-chan source.Update) {
	t.Helper()
	return runSourceWith(t, Config{Address: addr})
}

// runSourceWith is runSource with cfg's other fields.
func runSourceWith(t testing.TB, cfg Config) (*Source, <-chan source.Update) {
	t.Helper()
	cfg.NodeName, cfg.InitialBackoff, cfg.MaxBackoff = "node-a", time.Millisecond, 50*time.Millisecond
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	updates := make(chan source.Update, 100)
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, func(u source.Update) error { updates <- u; return nil }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return s, updates
}

func nextUpdate(t testing.TB, updates <-chan source.Update) source.Update {
	t.Helper()
	select {
	case u := <-updates:
		return u
	case <-time.After(10 * time.Second):
		t.Fatal("no update")
		return source.Update{}
	}
}
