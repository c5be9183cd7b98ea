package kernel

import (
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/shared"
)

// trafficTopology is one service over three zones of two regions, picked
// at random, so every source reaches its own zone, or all three.
func trafficTopology() *shared.Topology {
	return &shared.Topology{Services: []shared.ServiceSpec{{
		Name: "traffic", VIP: "127.77.25.1:80", Scopes: []string{"region", "zone"},
		Endpoints: []shared.EndpointSpec{
			{Address: "127.0.25.1:9125", Locality: shared.Locality{"region": "r1", "zone": "z1"}},
			{Address: "127.0.25.2:9125", Locality: shared.Locality{"region": "r1", "zone": "z2"}},
			{Address: "127.0.25.3:9125", Locality: shared.Locality{"region": "r2", "zone": "z3"}},
		},
	}}}
}

// trafficPair is what the test saw: a source locality (as a string) and the
// backend that answered.
type trafficPair struct{ src, backend string }

// countsOf are the installer's traffic counts by trafficPair.
func countsOf(t *testing.T, in *Installer) (map[trafficPair]uint64, uint64) {
	t.Helper()
	counts, other, err := in.Traffic()
	if err != nil {
		t.Fatal(err)
	}
	out := map[trafficPair]uint64{}
	for _, c := range counts {
		if c.Frontend.String() != "127.77.25.1:80" {
			t.Errorf("count for frontend %s, want 127.77.25.1:80", c.Frontend)
		}
		out[trafficPair{fmt.Sprint(c.Source), c.Backend.String()}] += c.Picks
	}
	return out, other.Picks
}

// TestTrafficCounts: real connects from the node's cgroup and from two
// cgroups with their own localities are counted per (source locality,
// backend) exactly as the backends' answers say they went, one per
// connection; a UDP socket that keeps its backend for five datagrams is
// counted once.
func TestTrafficCounts(t *testing.T) {
	kerneltest.RequireRoot(t)
	top := trafficTopology()
	kerneltest.Backends(t, backendsOf(top))
	node := shared.Locality{"region": "r1", "zone": "z1"}
	in, cg := setupWith(t, mustBuild(t, top, 1), Config{Locality: node})
	sources := map[string]shared.Locality{cg: node}
	for _, name := range []string{"z2", "elsewhere"} {
		dir := filepath.Join(cg, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { kerneltest.MoveTo(t, cg); os.Remove(dir) })
		sources[dir] = shared.Locality{"region": "r1", "zone": "z2"}
		if name == "elsewhere" {
			sources[dir] = shared.Locality{"region": "r9", "zone": "z9"} // no match: every endpoint
		}
		if err := in.SetCgroupLocality(dir, sources[dir]); err != nil {
			t.Fatal(err)
		}
	}
	want := map[trafficPair]uint64{}
	for dir, loc := range sources {
		kerneltest.MoveTo(t, dir)
		for range 30 {
			got, err := kerneltest.Ask("127.77.25.1:80")
			if err != nil {
				t.Fatal(err)
			}
			want[trafficPair{fmt.Sprint(loc), got}]++
		}
	}
	kerneltest.MoveTo(t, cg)
	want[trafficPair{fmt.Sprint(node), udpKept(t, "127.77.25.1:80", 5)}]++
	got, other := countsOf(t, in)
	if !maps.Equal(got, want) || other != 0 {
		t.Fatalf("traffic counts %v (other %d), want %v", got, other, want)
	}
}

// udpKept sends n datagrams from one unconnected UDP socket to vip and
// returns the backend that answered (the same each time: the socket keeps
// its backend while it is a candidate).
func udpKept(t *testing.T, vip string, n int) string {
	t.Helper()
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	to, err := net.ResolveUDPAddr("udp4", vip)
	if err != nil {
		t.Fatal(err)
	}
	var first string
	buf := make([]byte, 64)
	for i := range n {
		if _, err := pc.WriteTo([]byte("?"), to); err != nil {
			t.Fatal(err)
		}
		pc.SetReadDeadline(time.Now().Add(2 * time.Second))
		k, _, err := pc.ReadFrom(buf)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = string(buf[:k])
		} else if string(buf[:k]) != first {
			t.Fatalf("datagram %d answered by %s, the first by %s", i, buf[:k], first)
		}
	}
	return first
}

// TestTrafficCountsCapped: with room for two (source, service, backend)
// keys, the picks of a third key count as (other): the map never grows
// past its capacity and no pick is lost.
func TestTrafficCountsCapped(t *testing.T) {
	kerneltest.RequireRoot(t)
	top := trafficTopology()
	kerneltest.Backends(t, backendsOf(top))
	elsewhere := shared.Locality{"region": "r9", "zone": "z9"} // every endpoint a candidate
	in, _ := setupWith(t, mustBuild(t, top, 1), Config{Locality: elsewhere, Capacity: Capacity{Traffic: 2}})
	var order []string // backends in the order of their first pick
	seen := map[string]uint64{}
	for n := 1; len(seen) < 3 || n <= 60; n++ {
		got, err := kerneltest.Ask("127.77.25.1:80")
		if err != nil {
			t.Fatal(err)
		}
		if seen[got] == 0 {
			order = append(order, got)
		}
		seen[got]++
		if n > 500 {
			t.Fatalf("500 connects reached only %v", seen)
		}
	}
	firstTwo := map[trafficPair]uint64{}
	for _, b := range order[:2] {
		firstTwo[trafficPair{fmt.Sprint(elsewhere), b}] = seen[b]
	}
	got, other := countsOf(t, in)
	if !maps.Equal(got, firstTwo) || other != seen[order[2]] {
		t.Fatalf("counts %v, other %d; want %v, other %d (the third backend %s's)", got, other, firstTwo, seen[order[2]], order[2])
	}
}

// TestAddrPortOf: a map key read back is the address and port written
// (FrontendOf's inverse), for IPv4 and IPv6.
func TestAddrPortOf(t *testing.T) {
	for _, s := range []string{"127.77.25.1:80", "127.0.0.1:65535", "[::1]:9080", "[fd00::1:2]:1"} {
		ap := netip.MustParseAddrPort(s)
		if got := addrPortOf(FrontendOf(ap)); got != ap {
			t.Errorf("%s read back as %s", ap, got)
		}
	}
}

// TestForgetTrafficFreesKeys: in a map of two keys full after two
// backends, forgetting the counts read frees their keys, so the third
// backend gets a key of its own instead of counting as (other), and a
// forgotten backend picked again counts from one.
func TestForgetTrafficFreesKeys(t *testing.T) {
	kerneltest.RequireRoot(t)
	top := trafficTopology()
	kerneltest.Backends(t, backendsOf(top))
	elsewhere := shared.Locality{"region": "r9", "zone": "z9"} // every endpoint a candidate
	in, _ := setupWith(t, mustBuild(t, top, 1), Config{Locality: elsewhere, Capacity: Capacity{Traffic: 2}})
	seen := map[string]bool{}
	for n := 0; len(seen) < 2; n++ {
		got, err := kerneltest.Ask("127.77.25.1:80")
		if err != nil || n > 500 {
			t.Fatalf("%d connects: %v, reached %v", n, err, seen)
		}
		seen[got] = true
	}
	counts, _, err := in.Traffic()
	if err != nil {
		t.Fatal(err)
	}
	if n, err := in.ForgetTraffic(counts); n != len(counts) || err != nil {
		t.Fatalf("ForgetTraffic: %d of %d, %v", n, len(counts), err)
	}
	if n, err := in.ForgetTraffic(counts); n != len(counts) || err != nil { // already gone: not an error
		t.Fatalf("ForgetTraffic again: %d of %d, %v", n, len(counts), err)
	}
	want := map[trafficPair]uint64{}
	for range 2 { // at most two keys: the map holds them again
		got, err := kerneltest.Ask("127.77.25.1:80")
		if err != nil {
			t.Fatal(err)
		}
		want[trafficPair{fmt.Sprint(elsewhere), got}]++
	}
	got, other := countsOf(t, in)
	if !maps.Equal(got, want) || other != 0 {
		t.Fatalf("after forgetting: counts %v, other %d; want %v, other 0", got, other, want)
	}
}
