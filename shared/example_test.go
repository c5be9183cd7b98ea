package shared_test

import (
	"errors"
	"fmt"

	"github.com/loctree/loctree/shared"
)

// exampleTopology is a service with two endpoints in us-east-1a/rack-1, one
// in us-east-1b and one in eu-west.
func exampleTopology(mode, policy string) *shared.Topology {
	ep := func(addr, region, zone, subzone string) shared.EndpointSpec {
		return shared.EndpointSpec{Address: addr, Locality: shared.Locality{"region": region, "zone": zone, "subzone": subzone}}
	}
	return &shared.Topology{Services: []shared.ServiceSpec{{
		Name:   "reviews.default.svc.cluster.local",
		Hosts:  []string{"reviews"},
		Mode:   mode,
		Policy: policy,
		Endpoints: []shared.EndpointSpec{
			ep("127.0.1.1:9080", "us-east", "us-east-1a", "rack-1"),
			ep("127.0.1.2:9080", "us-east", "us-east-1a", "rack-1"),
			ep("127.0.1.3:9080", "us-east", "us-east-1b", "rack-1"),
			ep("127.0.2.1:9080", "eu-west", "eu-west-1a", "rack-1"),
		},
	}}}
}

// A Picker applies the service's policy inside the range a lookup returns.
func ExamplePicker() {
	tree, err := shared.Build(exampleTopology("failover", "round_robin"), shared.BuildOptions{Generation: 1})
	if err != nil {
		panic(err)
	}
	svc, _ := tree.Service("reviews")
	// No endpoint in us-east-1c: the lookup falls back to the region. The
	// rotation follows the tree's order (by label hash, then address).
	r := svc.Lookup(shared.Locality{"region": "us-east", "zone": "us-east-1c"})
	p := shared.NewPicker(tree, shared.PickerOptions{})
	fmt.Printf("%d candidates, %d scope(s) matched\n", r.Len(), r.Depth)
	for range 4 {
		i, _ := p.Pick(svc, r, 0)
		fmt.Println(tree.Endpoint(i).Addr)
	}
	// Output:
	// 3 candidates, 1 scope(s) matched
	// 127.0.1.3:9080
	// 127.0.1.1:9080
	// 127.0.1.2:9080
	// 127.0.1.3:9080
}

// A consistent_hash pick sends the same key to the same endpoint.
func ExampleHashKey() {
	tree, err := shared.Build(exampleTopology("failover", "consistent_hash"), shared.BuildOptions{})
	if err != nil {
		panic(err)
	}
	svc, _ := tree.Service("reviews")
	r := svc.Lookup(shared.Locality{"region": "us-east"})
	p := shared.NewPicker(tree, shared.PickerOptions{})
	key := shared.HashKey("session=4f2a") // a cookie, a header value, a source IP
	first, _ := p.Pick(svc, r, key)
	again, _ := p.Pick(svc, r, key)
	fmt.Println(first == again)
	// Output: true
}

// A Balancer needs no tree: add addresses and balance.
func ExampleBalancer() {
	b := shared.NewBalancer(shared.PolicyRoundRobin)
	for _, addr := range []string{"127.0.0.1:8081", "127.0.0.1:8082", "127.0.0.1:8083"} {
		if err := b.Add(addr); err != nil {
			panic(err)
		}
	}
	if err := b.Remove("127.0.0.1:8082"); err != nil {
		panic(err)
	}
	for range 3 {
		addr, _ := b.Balance("")
		b.Inc(addr) // a request starts
		fmt.Println(addr)
		b.Done(addr) // and ends
	}
	err := b.Add("127.0.0.1:8081")
	fmt.Println(errors.Is(err, shared.ErrDuplicateEndpoint))
	// Output:
	// 127.0.0.1:8081
	// 127.0.0.1:8083
	// 127.0.0.1:8081
	// true
}

// A LocalityBalancer answers for one service and one source locality; in
// strict mode a source without a full match gets ErrNoCandidate.
func ExampleLocalityBalancer() {
	tree, err := shared.Build(exampleTopology("strict", "round_robin"), shared.BuildOptions{})
	if err != nil {
		panic(err)
	}
	near := shared.Locality{"region": "us-east", "zone": "us-east-1a", "subzone": "rack-1"}
	lb, err := shared.NewLocalityBalancer(tree, "reviews", near, shared.PickerOptions{})
	if err != nil {
		panic(err)
	}
	for range 3 {
		addr, _ := lb.Balance("")
		fmt.Println(addr)
	}
	far := shared.Locality{"region": "ap-south"}
	lb, _ = shared.NewLocalityBalancer(tree, "reviews", far, shared.PickerOptions{})
	_, err = lb.Balance("")
	fmt.Println(errors.Is(err, shared.ErrNoCandidate))
	// Output:
	// 127.0.1.1:9080
	// 127.0.1.2:9080
	// 127.0.1.1:9080
	// true
}
