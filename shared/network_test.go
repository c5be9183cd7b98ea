package shared

import "testing"

// TestNetworkScopeEndsTheMatch pins the rule docs/FORMAT.md and RATIONALE.md
// ("Why does network as the first scope rank like every other scope") state:
// a source whose network has no eligible endpoint matches no scope, so every
// eligible endpoint is a candidate. ztunnel since 2d8e90ee (src/state.rs
// load_balance, lines 438-489 at 62d82653) would rank the other networks'
// endpoints by region and keep only 127.0.0.1; with an endpoint in the
// source's network both pick it alone.
func TestNetworkScopeEndsTheMatch(t *testing.T) {
	top := &Topology{Services: []ServiceSpec{{Name: "s", Scopes: []string{"network", "region"}, Endpoints: []EndpointSpec{
		{Address: "127.0.0.1:80", Locality: Locality{"network": "net-b", "region": "us-east"}},
		{Address: "127.0.0.2:80", Locality: Locality{"network": "net-c", "region": "us-west"}},
		{Address: "127.0.0.3:80", Locality: Locality{"network": "net-d", "region": "eu"}},
	}}}}
	tree, err := Build(top, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc := &tree.Services()[0]
	if r := svc.Lookup(Locality{"network": "net-a", "region": "us-east"}); r.Depth != 0 || r.Len() != 3 {
		t.Fatalf("source on a network without endpoints: depth %d, %d candidates; want depth 0 and all 3", r.Depth, r.Len())
	}
	r := svc.Lookup(Locality{"network": "net-c", "region": "us-east"})
	if r.Depth != 1 || r.Len() != 1 || tree.Endpoint(r.Lo).Addr.String() != "127.0.0.2:80" {
		t.Fatalf("source on net-c: depth %d, %d candidates; want net-c's one endpoint", r.Depth, r.Len())
	}
}
