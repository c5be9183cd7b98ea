package xds

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loctree/loctree/loader/source/xds/internal/workloadapi"
)

func failoverZone() *workloadapi.LoadBalancing {
	return &workloadapi.LoadBalancing{RoutingPreference: []workloadapi.LoadBalancing_Scope{workloadapi.LoadBalancing_ZONE}, Mode: workloadapi.LoadBalancing_FAILOVER}
}

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

const key = "ns/web.ns.svc.cluster.local"

func webService() *service {
	return &service{key: key, name: "web", ns: "ns", hostname: "web.ns.svc.cluster.local", lb: failoverZone(),
		vips: addrs("127.0.10.1"), vipNets: []string{""}, ports: []port{{80, 8080}, {81, 0}}}
}

func wl(uid string, ips []netip.Addr, ports map[uint32]uint32) *workload {
	return &workload{uid: uid, addrs: ips, healthy: true, capacity: 1, services: map[string]map[uint32]uint32{key: ports}}
}

// TestMapPorts: the endpoint port is the workload's own target port for
// the service port, else the service's target_port; a workload with
// neither for a port is not an endpoint of it (ztunnel's load_balance:
// target_port 0 and no entry in the endpoint's port map → filtered out).
// The first port is the hostname, the second hostname:81.
func TestMapPorts(t *testing.T) {
	in := &mapInput{svc: webService(), workloads: []*workload{
		wl("a", addrs("100.64.0.1"), map[uint32]uint32{80: 9090, 81: 9191}),
		wl("b", addrs("100.64.0.2"), map[uint32]uint32{}),
	}}
	specs, err := treeServices(in)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, sp := range specs {
		for _, ep := range sp.Endpoints {
			got[sp.Name] = append(got[sp.Name], ep.Address)
		}
	}
	want := map[string][]string{
		"web.ns.svc.cluster.local":    {"100.64.0.1:9090", "100.64.0.2:8080"},
		"web.ns.svc.cluster.local:81": {"100.64.0.1:9191"},
	}
	if len(got) != 2 || !slices.Equal(got[specs[0].Name], want[specs[0].Name]) || !slices.Equal(got[specs[1].Name], want[specs[1].Name]) {
		t.Errorf("endpoints %v, want %v", got, want)
	}
	if specs[0].VIP != "127.0.10.1:80" || specs[1].VIP != "127.0.10.1:81" {
		t.Errorf("VIPs %s, %s", specs[0].VIP, specs[1].VIP)
	}
}

// TestMapWeightHealthLocality: capacity is the weight (1 when unset, so
// left at the tree's default), UNHEALTHY an unhealthy endpoint, and the
// locality, node, network and cluster the scope values.
func TestMapWeightHealthLocality(t *testing.T) {
	a := wl("a", addrs("100.64.0.1"), nil)
	a.capacity, a.healthy, a.locality, a.node, a.network, a.cluster = 3, false, [3]string{"r1", "z1", "s1"}, "n1", "net1", "c1"
	b := wl("b", addrs("100.64.0.2"), nil)
	b.capacity = 0
	specs, err := treeServices(&mapInput{svc: webService(), workloads: []*workload{a, b}})
	if err != nil {
		t.Fatal(err)
	}
	ea, eb := specs[0].Endpoints[0], specs[0].Endpoints[1]
	if *ea.Weight != 3 || *ea.Healthy || ea.Locality["region"] != "r1" || ea.Locality["zone"] != "z1" || ea.Locality["subzone"] != "s1" ||
		ea.Locality["node"] != "n1" || ea.Locality["network"] != "net1" || ea.Locality["cluster"] != "c1" {
		t.Errorf("a: %+v (weight %d)", ea, *ea.Weight)
	}
	if *eb.Weight != 0 || eb.Healthy != nil {
		t.Errorf("b: %+v", eb)
	}
	if specs[0].Scopes[0] != "zone" || specs[0].Mode != "failover" {
		t.Errorf("settings: %v %s", specs[0].Scopes, specs[0].Mode)
	}
}

// TestMapDualStack: a second VIP family is a #ipv6 twin without hosts
// holding the workloads' IPv6 addresses; of two VIPs of one family on
// two networks, the agent's network's is the VIP.
func TestMapDualStack(t *testing.T) {
	svc := webService()
	svc.ports = svc.ports[:1]
	svc.vips, svc.vipNets = addrs("127.0.10.1", "127.0.20.1", "::1"), []string{"net1", "net2", ""}
	in := &mapInput{svc: svc, network: "net2", workloads: []*workload{wl("a", addrs("100.64.0.1", "2001:db8::1"), nil)}}
	specs, err := treeServices(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 2 || specs[0].Name != "web.ns.svc.cluster.local" || specs[1].Name != "web.ns.svc.cluster.local#ipv6" {
		t.Fatalf("names: %v", specs)
	}
	if specs[0].VIP != "127.0.20.1:80" || specs[0].Endpoints[0].Address != "100.64.0.1:8080" {
		t.Errorf("v4: %s %v", specs[0].VIP, specs[0].Endpoints)
	}
	if specs[1].VIP != "[::1]:80" || specs[1].Endpoints[0].Address != "[2001:db8::1]:8080" || len(specs[1].Hosts) != 0 {
		t.Errorf("v6: %s %v hosts %v", specs[1].VIP, specs[1].Endpoints, specs[1].Hosts)
	}
}

// TestMapHosts: the Kubernetes source's host forms; the bare name only
// while no other namespace has a Service of that name.
func TestMapHosts(t *testing.T) {
	in := &mapInput{svc: webService()}
	specs, _ := treeServices(in)
	want := "web:80 web.ns:80 web.ns.svc:80 web.ns.svc.cluster.local:80 web web.ns web.ns.svc"
	if got := strings.Join(specs[0].Hosts, " "); got != want {
		t.Errorf("hosts %q, want %q", got, want)
	}
	in.nameShared = true
	specs, _ = treeServices(in)
	if slices.Contains(specs[0].Hosts, "web") || slices.Contains(specs[1].Hosts, "web:81") {
		t.Errorf("a shared name has the bare name: %v %v", specs[0].Hosts, specs[1].Hosts)
	}
}

// TestMapRefusals: an endpoint only a network gateway reaches (on another
// network than the agent's) or known by DNS name only refuses the
// service; an address-less workload on the agent's own network is left
// out, as ztunnel leaves it out (in_network: never via the gateway).
func TestMapRefusals(t *testing.T) {
	gw := wl("gw", nil, nil)
	gw.gateway, gw.network = true, "net2"
	if _, err := treeServices(&mapInput{svc: webService(), network: "net1", workloads: []*workload{gw}}); err == nil || !strings.Contains(err.Error(), "only through its network gateway") {
		t.Errorf("gateway-only endpoint: %v", err)
	}
	specs, err := treeServices(&mapInput{svc: webService(), network: "net2", workloads: []*workload{gw}})
	if err != nil || len(specs[0].Endpoints) != 0 {
		t.Errorf("on its own network: %v, %v", specs, err)
	}
	dns := wl("dns", nil, nil)
	dns.hostname = "backend.example"
	if _, err := treeServices(&mapInput{svc: webService(), workloads: []*workload{dns}}); err == nil || !strings.Contains(err.Error(), "has a DNS name") {
		t.Errorf("DNS endpoint: %v", err)
	}
	cidr := webService()
	cidr.cidr = "240.0.1.0/24"
	if _, err := treeServices(&mapInput{svc: cidr}); err == nil || !strings.Contains(err.Error(), "is a range") {
		t.Errorf("CIDR VIP: %v", err)
	}
}

// FuzzDecode: any bytes as a resource decode or fail, never panic, and a
// decoded workload or service has the name its resource must carry.
func FuzzDecode(f *testing.F) {
	for _, a := range []*workloadapi.Address{
		wdsWorkload("Kubernetes//Pod/ns/a", "100.64.0.1", "n", "z", key, 8080, true),
		wdsService("web", "127.0.10.1", workloadapi.LoadBalancing_NETWORK, workloadapi.LoadBalancing_ZONE),
	} {
		b, _ := proto.Marshal(a)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		w, s, err := decode(&anypb.Any{TypeUrl: AddressType, Value: b})
		if err == nil && (w == nil) == (s == nil) {
			t.Fatalf("decoded to %v and %v", w, s)
		}
		if w != nil && w.uid == "" || s != nil && !strings.Contains(s.key, "/") {
			t.Fatalf("decoded a nameless resource: %+v %+v", w, s)
		}
	})
}
