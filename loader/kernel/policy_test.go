package kernel

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/loctree/loctree/bpf"
	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/shared"
)

// TestWeightedDistribution: weights 1 and 3 in the candidate range give
// about 25% / 75% of the connections (±3.7σ over 400).
func TestWeightedDistribution(t *testing.T) {
	kerneltest.RequireRoot(t)
	top := mesh()
	kerneltest.Backends(t, backendsOf(top))
	tree, _ := shared.Build(top, shared.BuildOptions{Generation: 1})
	setup(t, tree, shared.Locality{"region": "r1", "zone": "z1"})
	seen := map[string]int{}
	const n = 400
	for range n {
		got, err := kerneltest.Ask("127.77.0.3:80")
		if err != nil {
			t.Fatal(err)
		}
		seen[got]++
	}
	if frac := float64(seen["127.0.3.2:9003"]) / n; frac < 0.67 || frac > 0.83 || seen["127.0.3.1:9003"]+seen["127.0.3.2:9003"] != n {
		t.Fatalf("weighted 1:3 gave %v", seen)
	}
}

// TestLeastConnections: open connections are counted per endpoint, the
// picks keep the counts balanced, and closing the sockets gives the counts
// back (cgroup/sock_release).
func TestLeastConnections(t *testing.T) {
	kerneltest.RequireRoot(t)
	top := mesh()
	kerneltest.Backends(t, backendsOf(top))
	tree, _ := shared.Build(top, shared.BuildOptions{Generation: 1})
	in := setup(t, tree, shared.Locality{"region": "r1", "zone": "z1"})
	lc, _ := tree.Service("lc")
	svc := in.installed[FrontendOf(lc.VIP())]
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	const n = 60
	for range n {
		c, err := net.DialTimeout("tcp", "127.77.0.5:80", 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	counts := connCounts(t, in, svc)
	if counts[0]+counts[1] != n || max(counts[0], counts[1])-min(counts[0], counts[1]) > 12 {
		t.Fatalf("open connections per endpoint %v, want %d balanced", counts, n)
	}
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	deadline := time.Now().Add(5 * time.Second)
	for counts = connCounts(t, in, svc); counts[0]+counts[1] != 0 && time.Now().Before(deadline); counts = connCounts(t, in, svc) {
		time.Sleep(20 * time.Millisecond)
	}
	if counts[0]+counts[1] != 0 {
		t.Fatalf("after closing every socket the counts are %v", counts)
	}
}

// connCounts are the least_connections counts of the endpoints of an
// installed service, in region order.
func connCounts(t *testing.T, in *Installer, svc bpf.Service) []uint64 {
	t.Helper()
	var out []uint64
	for i := svc.EpBase; i < svc.EpBase+svc.EpLen; i++ {
		var ep bpf.Endpoint
		if err := in.k.objs.LtEndpoints.Lookup(i, &ep); err != nil {
			t.Fatal(err)
		}
		out = append(out, backendConns(t, in, backendOf(ep)))
	}
	return out
}

func backendOf(ep bpf.Endpoint) bpf.Backend {
	return bpf.Backend{Addr: ep.Addr, Port: ep.Port, Family: ep.Family}
}

// backendConns is the least_connections count of one backend.
func backendConns(t *testing.T, in *Installer, b bpf.Backend) uint64 {
	t.Helper()
	var v uint64
	if err := in.k.objs.LtConns.Lookup(&b, &v); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		t.Fatal(err)
	}
	return v
}

// TestSocketsFull: with more redirected sockets open than --max-sockets,
// the extra ones are still redirected, counted in the stats, and do not
// leave least_connections counts behind.
func TestSocketsFull(t *testing.T) {
	kerneltest.RequireRoot(t)
	top := mesh()
	kerneltest.Backends(t, backendsOf(top))
	tree, _ := shared.Build(top, shared.BuildOptions{Generation: 1})
	in, _ := setupWith(t, tree, Config{Locality: shared.Locality{"region": "r1", "zone": "z1"}, Capacity: Capacity{Sockets: 4}})
	lc, _ := tree.Service("lc")
	svc := in.installed[FrontendOf(lc.VIP())]
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range 10 {
		c, err := net.DialTimeout("tcp", lc.VIP().String(), 2*time.Second)
		if err != nil {
			t.Fatalf("connect beyond the socket table: %v", err)
		}
		conns = append(conns, c)
	}
	st, err := in.k.stats()
	if err != nil {
		t.Fatal(err)
	}
	if counts := connCounts(t, in, svc); st[bpf.StatSockFull] != 6 || counts[0]+counts[1] != 4 {
		t.Fatalf("10 sockets, table of 4: %d not remembered (want 6), counts %v (want 4 in all)", st[bpf.StatSockFull], counts)
	}
}
