package kernel

import (
	"fmt"
	"slices"
	"testing"

	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/shared"
)

// TestConnectNetworkRule: real connects from the test's cgroup land only on
// ztunnel's candidates (istio/ztunnel src/state.rs load_balance at
// 62d82653, lines 438-439 and 463-498). The node's network net-a has no
// endpoint: ztunnel ranks the other networks' endpoints by region, so
// only the two us-east endpoints (on net-b and net-d) are candidates, in
// turn (round robin). On net-c the node gets net-c's endpoint alone.
func TestConnectNetworkRule(t *testing.T) {
	kerneltest.RequireRoot(t)
	loc := func(network, region string) shared.Locality {
		return shared.Locality{"network": network, "region": region}
	}
	top := &shared.Topology{Services: []shared.ServiceSpec{{Name: "net", VIP: "127.77.10.1:80", Scopes: []string{"network", "region"},
		Policy: "round_robin", Endpoints: []shared.EndpointSpec{
			{Address: "127.0.50.1:9050", Locality: loc("net-b", "us-east")},
			{Address: "127.0.50.2:9050", Locality: loc("net-c", "us-west")},
			{Address: "127.0.50.3:9050", Locality: loc("net-d", "eu")},
			{Address: "127.0.50.4:9050", Locality: loc("net-d", "us-east")},
		}}}}
	kerneltest.Backends(t, backendsOf(top))
	tree, err := shared.Build(top, shared.BuildOptions{Generation: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		src  shared.Locality
		want []string
	}{
		{loc("net-a", "us-east"), []string{"127.0.50.1:9050", "127.0.50.4:9050"}},
		{loc("net-c", "us-east"), []string{"127.0.50.2:9050"}},
	} {
		t.Run(fmt.Sprint(c.src), func(t *testing.T) {
			setup(t, tree, c.src)
			seen := map[string]int{}
			for range 40 {
				got, err := kerneltest.Ask("127.77.10.1:80")
				if err != nil {
					t.Fatal(err)
				}
				seen[got]++
			}
			for got, n := range seen {
				if !slices.Contains(c.want, got) || n != 40/len(c.want) {
					t.Fatalf("connects went to %v, want %v in turn", seen, c.want)
				}
			}
		})
	}
}
