package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/loctree/loctree/filter/shareddata"
	"github.com/loctree/loctree/host"
	"github.com/loctree/loctree/shared"
)

// benchTopology is one service with n endpoints over 3 regions × 10 zones
// × 5 subzones.
func benchTopology(n int) *shared.Topology {
	svc := shared.ServiceSpec{Name: "reviews.default.svc.cluster.local", Hosts: []string{"reviews"}}
	for i := range n {
		svc.Endpoints = append(svc.Endpoints, shared.EndpointSpec{
			Address: fmt.Sprintf("127.%d.%d.%d:9080", 1+i/65536, i/256%256, i%256),
			Locality: shared.Locality{"region": fmt.Sprintf("r%d", i%3), "zone": fmt.Sprintf("z%d", i/3%10),
				"subzone": fmt.Sprintf("s%d", i/30%5)},
		})
	}
	return &shared.Topology{Services: []shared.ServiceSpec{svc}}
}

var benchSource = shared.Locality{"region": "r1", "zone": "z4", "subzone": "s2"}

// benchGrownTopology is one service of n endpoints routed on [region, zone,
// subzone, node] whose levels grow with n as real meshes do: 3 regions, then
// zones, subzones and nodes about equally, about 10 endpoints per node. Its
// source, grownSource, sits on one of the nodes.
func benchGrownTopology(n int) *shared.Topology {
	per := max(2, int(math.Cbrt(float64(n/10/3)))) // zones per region, subzones per zone, nodes per subzone
	svc := shared.ServiceSpec{Name: "reviews.default.svc.cluster.local", Hosts: []string{"reviews"},
		Scopes: []string{"region", "zone", "subzone", "node"}}
	for i := range n {
		leaf := i % (3 * per * per * per)
		svc.Endpoints = append(svc.Endpoints, shared.EndpointSpec{
			Address: fmt.Sprintf("127.%d.%d.%d:9080", 1+i/65536, i/256%256, i%256),
			Locality: shared.Locality{"region": fmt.Sprintf("r%d", leaf%3), "zone": fmt.Sprintf("z%d", leaf/3%per),
				"subzone": fmt.Sprintf("s%d", leaf/3/per%per), "node": fmt.Sprintf("n%d", leaf/3/per/per)},
		})
	}
	return &shared.Topology{Services: []shared.ServiceSpec{svc}}
}

var grownSource = shared.Locality{"region": "r1", "zone": "z1", "subzone": "s1", "node": "n1"}

// benchDistributeTopology is benchTopology with spillover, every 7th
// endpoint unhealthy, and a distribute rule for benchSource's region: 60 %
// to its zone, 40 % to region r2.
func benchDistributeTopology(n int) *shared.Topology {
	top := benchTopology(n)
	svc := &top.Services[0]
	svc.Spillover = &shared.SpilloverSpec{}
	svc.Distribute = []shared.DistributeSpec{{From: "r1", To: map[string]uint32{"r1/z4": 60, "r2": 40}}}
	f := false
	for i := range svc.Endpoints {
		if i%7 == 0 {
			svc.Endpoints[i].Healthy = &f
		}
	}
	return top
}

func benchConfig(n int) string {
	top, _ := json.Marshal(benchTopology(n))
	loc, _ := json.Marshal(benchSource)
	return fmt.Sprintf(`{"topology":%s,"locality":%s}`, top, loc)
}

// BenchmarkFilterRequest is the filter's work per request in the wazero
// host (compiled engine): stream create, request headers (lookup, pick,
// header write), on_log, on_done, on_delete.
//
// In endpoints=N/grown the service routes on four scopes whose levels grow
// with N (benchGrownTopology), up to 100,000 endpoints.
func BenchmarkFilterRequest(b *testing.B) {
	for _, n := range []int{100, 10000, 100000} {
		b.Run(fmt.Sprintf("endpoints=%d/grown/notimeout", n), func(b *testing.B) {
			benchFilterRequest(b, fetchedHostAt(b, benchGrownTopology(n), grownSource, host.Options{}))
		})
	}
	for _, n := range []int{100, 10000} {
		for _, limit := range []struct {
			name    string
			timeout int64
			top     func(int) *shared.Topology
		}{{"notimeout", 0, benchTopology}, {"timeout", int64(5 * time.Second), benchTopology},
			{"spillover+distribute/notimeout", 0, benchDistributeTopology}} {
			b.Run(fmt.Sprintf("endpoints=%d/%s", n, limit.name), func(b *testing.B) {
				benchFilterRequest(b, fetchedHost(b, limit.top(n), host.Options{CallTimeout: timeDuration(limit.timeout)}))
			})
		}
	}
}

// benchFilterRequest drives requests for reviews through one VM of h.
func benchFilterRequest(b *testing.B, h *host.Host) {
	vm, err := h.NewVM(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	defer vm.Close()
	req := &host.Request{Headers: host.Headers(req("reviews:9080"))}
	ctx := context.Background()
	b.ResetTimer()
	cpu := cpuTime()
	for b.Loop() {
		res, err := vm.Do(ctx, req, nil)
		if err != nil || len(res.Request.Headers) != 5 {
			b.Fatal(err, res.Request.Headers)
		}
	}
	if cpu >= 0 {
		b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
	}
}

// fetchedHost is a host whose VMs start from an n-endpoint tree that
// another VM published in shared data (the agent-fed production setup).
func fetchedHost(b *testing.B, top *shared.Topology, opts host.Options) *host.Host {
	return fetchedHostAt(b, top, benchSource, opts)
}

// fetchedHostAt is fetchedHost for a proxy at locality src.
func fetchedHostAt(b *testing.B, top *shared.Topology, src shared.Locality, opts host.Options) *host.Host {
	tree, err := shared.Build(top, shared.BuildOptions{Generation: 1})
	if err != nil {
		b.Fatal(err)
	}
	loc, _ := json.Marshal(src)
	opts.ManualTicks = true
	h := newHost(b, fmt.Sprintf(`{"tree":{"cluster":"agent"},"locality":%s}`, loc), opts)
	publishShared(h, tree)
	return h
}

// publishShared puts tree in the host's shared data as a fetching VM
// publishes it (blob, then its version).
func publishShared(h *host.Host, tree *shared.Tree) {
	ver := blobVersion(tree.Bytes())
	h.Shared().Set(shareddata.Tree, tree.Bytes(), 0)
	h.Shared().Set(shareddata.Generation, ver[:], 0)
}

// TestPickLoadsPathAllocs: the filter's pick for a spillover service with
// distribute rules (cached loads, pick, priority, address) allocates
// nothing once the address is cached.
func TestPickLoadsPathAllocs(t *testing.T) {
	tree, err := shared.Build(benchDistributeTopology(1000), shared.BuildOptions{Generation: 1})
	if err != nil {
		t.Fatal(err)
	}
	st := newTreeState(tree, newSourceLocality(benchSource))
	svc, _ := tree.Service("reviews")
	l := st.loads[svc.Index()]
	if l == nil || l.Rule != 1 {
		t.Fatalf("loads %+v, want the distribute rule", l)
	}
	for range 1000 { // fill the address cache
		ep, _ := st.pickLoads(svc, l, 0, false)
		st.addr(ep)
	}
	if n := testing.AllocsPerRun(1000, func() {
		ep, ok := st.pickLoads(svc, l, 0, false)
		if !ok || l.Priority(ep) != 0 || st.addr(ep) == "" {
			t.Fatal("no pick")
		}
	}); n != 0 {
		t.Fatalf("%.1f allocations per pick", n)
	}
}

// BenchmarkNativeLookup is the same lookup and pick in native Go (the
// denominator of the host/native ratio).
//
// In endpoints=N/grown the service routes on four scopes whose levels grow
// with N (benchGrownTopology), up to 100,000 endpoints.
func BenchmarkNativeLookup(b *testing.B) {
	for _, n := range []int{100, 10000, 100000} {
		b.Run(fmt.Sprintf("endpoints=%d/grown", n), func(b *testing.B) {
			tree, err := shared.Build(benchGrownTopology(n), shared.BuildOptions{Generation: 1})
			if err != nil {
				b.Fatal(err)
			}
			benchNativePick(b, tree, grownSource)
		})
	}
	for _, n := range []int{100, 10000} {
		b.Run(fmt.Sprintf("endpoints=%d", n), func(b *testing.B) {
			tree, err := shared.Build(benchTopology(n), shared.BuildOptions{Generation: 1})
			if err != nil {
				b.Fatal(err)
			}
			benchNativePick(b, tree, benchSource)
		})
		b.Run(fmt.Sprintf("endpoints=%d/spillover+distribute", n), func(b *testing.B) {
			tree, err := shared.Build(benchDistributeTopology(n), shared.BuildOptions{Generation: 1})
			if err != nil {
				b.Fatal(err)
			}
			st := newTreeState(tree, newSourceLocality(benchSource))
			b.ResetTimer()
			for b.Loop() {
				svc, _ := tree.Service("reviews")
				ep, ok := st.pickLoads(svc, st.loads[svc.Index()], 0, false)
				if !ok || st.addr(ep) == "" {
					b.Fatal("no pick")
				}
			}
		})
	}
}

// benchNativePick looks up and picks for src in tree's service "reviews".
func benchNativePick(b *testing.B, tree *shared.Tree, src shared.Locality) {
	st := newTreeState(tree, newSourceLocality(src))
	b.ResetTimer()
	for b.Loop() {
		svc, _ := tree.Service("reviews")
		r := svc.LookupLabels(st.labels[svc.Index()])
		if r.Depth != svc.Levels() || st.addr(st.pick(svc, r, 0, false)) == "" {
			b.Fatal("no pick at full depth")
		}
	}
}

// BenchmarkVMStart is one VM's instantiation and start (Go runtime
// initialisation, root context, plugin configuration, tree install) with a
// 10,000-endpoint tree, inline (JSON parsed and built in the VM) or fetched
// (the blob another VM published in shared data, decoded), with and
// without the per-callback time limit; it reports the VM's linear memory.
func BenchmarkVMStart(b *testing.B) {
	tree, err := shared.Build(benchTopology(10000), shared.BuildOptions{Generation: 1})
	if err != nil {
		b.Fatal(err)
	}
	loc, _ := json.Marshal(benchSource)
	for _, c := range []struct {
		name, config string
		timeout      time.Duration
	}{
		{"inline/notimeout", benchConfig(10000), 0},
		{"fetched/notimeout", fmt.Sprintf(`{"tree":{"cluster":"agent"},"locality":%s}`, loc), 0},
		{"inline/timeout", benchConfig(10000), 5 * time.Second},
		{"fetched/timeout", fmt.Sprintf(`{"tree":{"cluster":"agent"},"locality":%s}`, loc), 5 * time.Second},
	} {
		b.Run(c.name, func(b *testing.B) {
			h := newHost(b, c.config, host.Options{CallTimeout: c.timeout, ManualTicks: true})
			publishShared(h, tree)
			var mem uint32
			for b.Loop() {
				vm, err := h.NewVM(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				if res, err := vm.Do(context.Background(), &host.Request{Headers: host.Headers(req("reviews"))}, nil); err != nil || len(res.Request.Headers) != 5 {
					b.Fatalf("no pick after start: %v %v", err, res)
				}
				mem = vm.MemorySize()
				vm.Close()
			}
			b.ReportMetric(float64(mem)/(1<<20), "MiB-linear-memory/VM")
			b.ReportMetric(float64(len(loctreeWasm(b)))/(1<<20), "MiB-wasm")
		})
	}
}
