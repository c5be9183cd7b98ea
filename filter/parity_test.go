package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/loctree/loctree/host"
	"github.com/loctree/loctree/shared"
)

// randomTopology makes services with random localities, health, weights,
// modes and policies. Values come from small sets so that sources match
// at every depth.
func randomTopology(rng *rand.Rand) *shared.Topology {
	top := &shared.Topology{}
	policies := []string{"random", "weighted", "round_robin", "least_request", "least_connections", "consistent_hash"}
	for s := range 6 {
		svc := shared.ServiceSpec{
			Name:   fmt.Sprintf("svc%d.default.svc.cluster.local", s),
			Hosts:  []string{fmt.Sprintf("svc%d", s)},
			Mode:   []string{"failover", "strict"}[rng.IntN(2)],
			Policy: policies[rng.IntN(len(policies))],
		}
		if rng.IntN(3) == 0 {
			svc.Scopes = []string{"region", "zone"}
		}
		for e := range 1 + rng.IntN(60) {
			w, healthy := uint32(1+rng.IntN(5)), rng.IntN(5) != 0
			svc.Endpoints = append(svc.Endpoints, shared.EndpointSpec{
				Address: fmt.Sprintf("127.0.%d.%d:%d", 10+s, 1+e, 8000+s),
				Locality: shared.Locality{
					"region": fmt.Sprintf("r%d", rng.IntN(3)), "zone": fmt.Sprintf("z%d", rng.IntN(3)),
					"subzone": fmt.Sprintf("s%d", rng.IntN(2)),
				},
				Weight: &w, Healthy: &healthy,
			})
		}
		top.Services = append(top.Services, svc)
	}
	return top
}

// TestParity sends random requests through the .wasm and checks that every
// pick lies in the candidate set shared/ computes for the same source and
// service, that strict misses are 503s, and that failover misses pass.
func TestParity(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 2))
	top := randomTopology(rng)
	tree, err := shared.Build(top, shared.BuildOptions{Generation: 1})
	if err != nil {
		t.Fatal(err)
	}
	topJSON, _ := json.Marshal(top)
	const sources, perSource = 12, 100
	checked := 0
	for range sources {
		src := shared.Locality{"region": fmt.Sprintf("r%d", rng.IntN(4)), "zone": fmt.Sprintf("z%d", rng.IntN(4)),
			"subzone": fmt.Sprintf("s%d", rng.IntN(3))}
		locJSON, _ := json.Marshal(src)
		h := newHost(t, fmt.Sprintf(`{"topology":%s,"locality":%s}`, topJSON, locJSON), host.Options{})
		vm, err := h.NewVM(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for range perSource {
			svc := tree.Services()[rng.IntN(tree.NumServices())]
			checkPick(t, vm, tree, svc, src, rng)
			checked++
		}
		vm.Close()
	}
	if checked < 1000 {
		t.Fatalf("only %d requests checked", checked)
	}
}

func checkPick(t *testing.T, vm *host.VM, tree *shared.Tree, svc *shared.Service, src shared.Locality, rng *rand.Rand) {
	t.Helper()
	headers := req(svc.Hosts()[0], [2]string{hashKeyHeader, fmt.Sprint(rng.Uint64())})
	res, err := vm.Do(context.Background(), &host.Request{Headers: host.Headers(headers)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, has := res.Request.Headers.Get(defaultHeader)
	r := svc.Lookup(src)
	if r.Len() == 0 {
		strict := svc.Mode() == shared.ModeStrict
		if has || (strict && (res.Local == nil || res.Local.Status != 503)) || (!strict && res.Local != nil) {
			t.Fatalf("%s from %v: no candidate, got header %q local %+v", svc.Name(), src, got, res.Local)
		}
		return
	}
	for i := r.Lo; i < r.Hi; i++ {
		if tree.Endpoint(i).Addr.String() == got {
			return
		}
	}
	t.Fatalf("%s from %v: picked %q outside the candidate set [%d,%d)", svc.Name(), src, got, r.Lo, r.Hi)
}

// TestParityNetworkRule drives the real .wasm with a source on a network
// that has no endpoint: ztunnel's rule (src/state.rs load_balance at
// 62d82653, lines 463-489) keeps the other networks' endpoints in the
// source's region, on two networks; the plain rule would give all four.
func TestParityNetworkRule(t *testing.T) {
	top := &shared.Topology{Services: []shared.ServiceSpec{{Name: "net.default.svc.cluster.local", Hosts: []string{"net"},
		Scopes: []string{"network", "region"}, Policy: "round_robin", Endpoints: []shared.EndpointSpec{
			{Address: "127.0.20.1:8080", Locality: shared.Locality{"network": "net-b", "region": "us-east"}},
			{Address: "127.0.20.2:8080", Locality: shared.Locality{"network": "net-c", "region": "us-west"}},
			{Address: "127.0.20.3:8080", Locality: shared.Locality{"network": "net-d", "region": "eu"}},
			{Address: "127.0.20.4:8080", Locality: shared.Locality{"network": "net-d", "region": "us-east"}},
		}}}}
	tree, err := shared.Build(top, shared.BuildOptions{Generation: 1})
	if err != nil {
		t.Fatal(err)
	}
	topJSON, _ := json.Marshal(top)
	src := shared.Locality{"network": "net-a", "region": "us-east"}
	h := newHost(t, fmt.Sprintf(`{"topology":%s,"locality":{"network":"net-a","region":"us-east"}}`, topJSON), host.Options{})
	vm, err := h.NewVM(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer vm.Close()
	seen := map[string]int{}
	for range 100 {
		res, err := vm.Do(context.Background(), &host.Request{Headers: host.Headers(req("net"))}, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := res.Request.Headers.Get(defaultHeader)
		seen[got]++
	}
	svc := tree.Services()[0]
	if r := svc.Lookup(src); !svc.CrossNetwork(r) || r.Len() != 2 {
		t.Fatalf("shared: %+v, want the two us-east endpoints of other networks", r)
	}
	if len(seen) != 2 || seen["127.0.20.1:8080"] != 50 || seen["127.0.20.4:8080"] != 50 {
		t.Fatalf("the filter picked %v, want 127.0.20.1 and 127.0.20.4 in turn (round robin)", seen)
	}
}
