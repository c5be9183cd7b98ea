// Package treetest makes random topologies for tests of the kernel path:
// several services with VIPs in 127.77.0.0/16, endpoints on 127.0.x.y, small
// value alphabets so that sources match at every depth.
package treetest

import (
	"fmt"
	"math/rand/v2"

	"github.com/loctree/loctree/shared"
)

// Scopes are the scope keys random services draw from, in routing order.
var Scopes = []string{"region", "zone", "subzone", "node", "cluster", "network", "rack", "topology.istio.io/cluster"}

// Options shape a random topology.
type Options struct {
	Services     int  // number of services (default 1)
	MaxEndpoints int  // endpoints per service are drawn from [0, MaxEndpoints) (default 40)
	IPv6         bool // some endpoints (and VIPs) are IPv6
	Policies     []string
	// NetworkFirst puts the scope network first (ztunnel's network rule,
	// which Build applies by default), the others after it in order.
	NetworkFirst bool
}

// networkFirst are Scopes with network first.
var networkFirst = []string{"network", "region", "zone", "subzone", "node", "cluster", "rack", "topology.istio.io/cluster"}

// Topology returns a random topology. Service i is "svc-i" with VIP
// 127.77.(i/250).(i%250+1):80 (or [fd77::i]:80 for some when IPv6).
func Topology(rng *rand.Rand, o Options) *shared.Topology {
	if o.Services == 0 {
		o.Services = 1
	}
	if o.MaxEndpoints == 0 {
		o.MaxEndpoints = 40
	}
	top := &shared.Topology{}
	for i := range o.Services {
		top.Services = append(top.Services, service(rng, o, i))
	}
	return top
}

func service(rng *rand.Rand, o Options, i int) shared.ServiceSpec {
	levels := 1 + rng.IntN(5)
	if rng.IntN(20) == 0 {
		levels = shared.MaxLevels
	}
	v6 := o.IPv6 && rng.IntN(3) == 0
	scopes := Scopes
	if o.NetworkFirst {
		scopes = networkFirst
	}
	spec := shared.ServiceSpec{Name: fmt.Sprintf("svc-%d", i), Scopes: scopes[:levels], VIP: VIP(i, v6)}
	if rng.IntN(3) == 0 {
		spec.Mode = "strict"
	}
	if rng.IntN(5) == 0 {
		spec.Health = "allow_all"
	}
	if len(o.Policies) > 0 {
		spec.Policy = o.Policies[rng.IntN(len(o.Policies))]
	}
	for j := range rng.IntN(o.MaxEndpoints) {
		spec.Endpoints = append(spec.Endpoints, endpoint(rng, spec.Scopes, j, v6))
	}
	return spec
}

func endpoint(rng *rand.Rand, scopes []string, j int, v6 bool) shared.EndpointSpec {
	e := shared.EndpointSpec{Locality: Source(rng, scopes, 4)}
	if v6 {
		e.Address = fmt.Sprintf("[::1]:%d", 20000+j)
	} else {
		e.Address = fmt.Sprintf("127.0.%d.%d:%d", j/250, j%250+1, 8000+rng.IntN(3))
	}
	if j > 0 && rng.IntN(4) == 0 { // endpoint 0 keeps weight 1: a service's total is never 0
		w := uint32(rng.IntN(5))
		e.Weight = &w
	}
	if rng.IntN(5) == 0 {
		f := false
		e.Healthy = &f
	}
	return e
}

// VIP is the frontend of service i.
func VIP(i int, v6 bool) string {
	if v6 {
		return fmt.Sprintf("[fd77::%x]:80", i+1)
	}
	return fmt.Sprintf("127.77.%d.%d:80", i/250, i%250+1)
}

// Source returns a random locality over scopes with values 1..n-1 of each
// scope or the value missing. Value n-1 (and above) may exist nowhere.
func Source(rng *rand.Rand, scopes []string, n int) shared.Locality {
	src := shared.Locality{}
	for _, sc := range scopes {
		if v := rng.IntN(n); v > 0 {
			src[sc] = fmt.Sprintf("%s-%d", sc, v)
		}
	}
	return src
}
