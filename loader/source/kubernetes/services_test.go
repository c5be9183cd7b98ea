package kubernetes

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/loctree/loctree/shared"
)

// TestMultiPortDualStack checks the names, hosts, VIPs and endpoints of a
// dual-stack Service with two TCP ports and a UDP port, fed by three slices.
func TestMultiPortDualStack(t *testing.T) {
	svc := service("shop", "cart", "PreferSameZone", []string{"127.77.0.30", "fd00:77::30"}, 80, 9090)
	svc.Spec.Ports = append([]corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(5353)}}, svc.Spec.Ports...)
	udp := discoveryv1.EndpointPort{Name: ptr.To("dns"), Port: ptr.To[int32](5353), Protocol: ptr.To(corev1.ProtocolUDP)}
	v4a := slice("shop", "cart", "cart-v4a", discoveryv1.AddressTypeIPv4, []ep{{addr: "127.0.3.1", node: "n1"}}, 1080, 10090)
	v4b := slice("shop", "cart", "cart-v4b", discoveryv1.AddressTypeIPv4, []ep{{addr: "127.0.3.2", node: "n2"}}, 1080, 10090)
	v4b.Ports = append(v4b.Ports, udp)
	v6 := slice("shop", "cart", "cart-v6", discoveryv1.AddressTypeIPv6, []ep{{addr: "fd00:3::1", node: "n1"}}, 1080, 10090)
	client := newClient(asObjects([]any{svc, v4a, v4b, v6}, clusterNodes())...)
	c := run(t, client, "n1")
	u := c.waitFor(t, 0, "cart", func(u Update) bool { return len(u.Topology.Services) == 6 })

	fq := "cart.shop.svc.cluster.local"
	loc1 := shared.Locality{"network": "net1", "region": "r1", "zone": "z1"}
	loc2 := shared.Locality{"network": "net1", "region": "r1", "zone": "z2"}
	v4eps := func(port string) []shared.EndpointSpec {
		return []shared.EndpointSpec{
			{Address: "127.0.3.1:" + port, Locality: loc1, Healthy: healthy(true)},
			{Address: "127.0.3.2:" + port, Locality: loc2, Healthy: healthy(true)},
		}
	}
	want := map[string]shared.ServiceSpec{
		fq + ":53/udp":      {VIP: "127.77.0.30:53", Endpoints: []shared.EndpointSpec{{Address: "127.0.3.2:5353", Locality: loc2, Healthy: healthy(true)}}},
		fq + ":53/udp#ipv6": {VIP: "[fd00:77::30]:53", Endpoints: []shared.EndpointSpec{}},
		fq: {VIP: "127.77.0.30:80", Endpoints: v4eps("1080"),
			Hosts: []string{"cart:80", "cart.shop:80", "cart.shop.svc:80", fq + ":80", "cart", "cart.shop", "cart.shop.svc"}},
		fq + "#ipv6": {VIP: "[fd00:77::30]:80", Endpoints: []shared.EndpointSpec{{Address: "[fd00:3::1]:1080", Locality: loc1, Healthy: healthy(true)}}},
		fq + ":9090": {VIP: "127.77.0.30:9090", Endpoints: v4eps("10090"),
			Hosts: []string{"cart:9090", "cart.shop:9090", "cart.shop.svc:9090"}},
		fq + ":9090#ipv6": {VIP: "[fd00:77::30]:9090", Endpoints: []shared.EndpointSpec{{Address: "[fd00:3::1]:10090", Locality: loc1, Healthy: healthy(true)}}},
	}
	for _, got := range u.Topology.Services {
		w, ok := want[got.Name]
		if !ok {
			t.Errorf("unexpected tree service %q", got.Name)
			continue
		}
		w.Name, w.Scopes, w.Mode, w.Health = got.Name, closeScopes, "failover", "only_healthy"
		if !reflect.DeepEqual(got, w) {
			t.Errorf("%s:\n got %+v\nwant %+v", got.Name, got, w)
		}
	}
	mustBuild(t, u.Topology)
}

// TestHealth covers the terminating fallback and publishNotReadyAddresses.
func TestHealth(t *testing.T) {
	term := func(addr string, serving bool) ep {
		return ep{addr: addr, node: "n1", ready: ptr.To(false), serving: ptr.To(serving), terminate: ptr.To(true)}
	}
	tests := []struct {
		name   string
		pnra   bool
		eps    []ep
		want   []bool
		health string
	}{
		{name: "ready wins over terminating", eps: []ep{{addr: "127.0.4.1"}, term("127.0.4.2", true)}, want: []bool{true, false}},
		{name: "only terminating: serving ones healthy", eps: []ep{{addr: "127.0.4.1", ready: ptr.To(false)}, term("127.0.4.2", true), term("127.0.4.3", false)}, want: []bool{false, true, false}},
		{name: "nil conditions are ready", eps: []ep{{addr: "127.0.4.1"}}, want: []bool{true}},
		{name: "publishNotReadyAddresses", pnra: true, eps: []ep{{addr: "127.0.4.1", ready: ptr.To(false)}}, want: []bool{false}, health: "allow_all"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := service("ns", "s", "PreferClose", []string{"127.77.0.40"}, 80)
			svc.Spec.PublishNotReadyAddresses = tt.pnra
			set, _, err := serviceSettings(svc, policyInput{})
			if err != nil {
				t.Fatal(err)
			}
			sl := slice("ns", "s", "s-1", discoveryv1.AddressTypeIPv4, tt.eps, 1080)
			specs := treeServices(&treeInput{svc: svc, settings: set, slices: []*discoveryv1.EndpointSlice{sl},
				labels: func(string) map[string]string { return nil }, domain: "cluster.local"}, map[string]struct{}{})
			var got []bool
			for _, e := range specs[0].Endpoints {
				got = append(got, *e.Healthy)
			}
			if !reflect.DeepEqual(got, tt.want) || specs[0].Health != cmpOr(tt.health, "only_healthy") {
				t.Errorf("healthy = %v health %q, want %v %q", got, specs[0].Health, tt.want, tt.health)
			}
		})
	}
}

// TestDuplicateAcrossSlices: an endpoint in two slices (while moving) appears
// once, ready wins; a slice without the service's port is ignored.
func TestDuplicateAcrossSlices(t *testing.T) {
	svc := service("ns", "s", "PreferClose", []string{"127.77.0.41"}, 80)
	set, _, _ := serviceSettings(svc, policyInput{})
	a := slice("ns", "s", "a", discoveryv1.AddressTypeIPv4, []ep{{addr: "127.0.5.1", ready: ptr.To(false)}}, 1080)
	b := slice("ns", "s", "b", discoveryv1.AddressTypeIPv4, []ep{{addr: "127.0.5.1"}}, 1080)
	other := slice("ns", "s", "c", discoveryv1.AddressTypeIPv4, []ep{{addr: "127.0.5.9"}}, 1081)
	specs := treeServices(&treeInput{svc: svc, settings: set, slices: []*discoveryv1.EndpointSlice{a, b, other},
		labels: func(string) map[string]string { return nil }, domain: "cluster.local"}, map[string]struct{}{})
	if eps := specs[0].Endpoints; len(eps) != 1 || eps[0].Address != "127.0.5.1:1080" || !*eps[0].Healthy {
		t.Errorf("endpoints = %+v, want one healthy 127.0.5.1:1080", eps)
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
