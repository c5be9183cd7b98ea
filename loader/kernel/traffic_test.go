package kernel

import (
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/loctree/loctree/bpf"
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

// byteBackends serve the byte test's protocol on addrs: read a 4-byte
// length n and n bytes, answer with the backend's address and 2n+1 more
// bytes, and close.
func byteBackends(t *testing.T, addrs []string) {
	t.Helper()
	for _, a := range addrs {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			t.Fatalf("backend %s: %v", a, err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					var hdr [4]byte
					if _, err := io.ReadFull(c, hdr[:]); err != nil {
						return
					}
					n := binary.BigEndian.Uint32(hdr[:])
					if _, err := io.CopyN(io.Discard, c, int64(n)); err != nil {
						return
					}
					c.Write(append([]byte(a), make([]byte, 2*n+1)...))
				}()
			}
		}()
	}
}

// exchange connects to addr, sends a request of n payload bytes, reads
// the answer to its end and closes. With halfClose it shuts its sending
// side first, so the socket reaches TCP_CLOSE (through TIME_WAIT) before
// the process closes it; without, the process closes it first (from
// CLOSE_WAIT). It returns the backend that answered and the bytes the
// application wrote and read.
func exchange(t *testing.T, addr string, n int, halfClose bool) (backend string, sent, received uint64) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	req := make([]byte, 4+n)
	binary.BigEndian.PutUint32(req, uint32(n))
	if _, err := c.Write(req); err != nil {
		t.Fatal(err)
	}
	if halfClose {
		if err := c.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
	}
	ans, err := io.ReadAll(c)
	if err != nil || len(ans) < len("127.0.25.1:9125") {
		t.Fatalf("answer of %d bytes: %v", len(ans), err)
	}
	return string(ans[:len("127.0.25.1:9125")]), uint64(len(req)), uint64(len(ans))
}

// TestTrafficBytes: real TCP connections from the node's cgroup and from
// a cgroup with its own locality send and receive known byte counts; once
// they are closed, each (source, backend) key's bytes sent and received
// are what the applications wrote and read, whichever of the socket's
// release and its TCP_CLOSE came first, and its picks are its
// connections. A connection to a backend's own address (not a VIP) is not
// counted, and no socket entry is left behind.
func TestTrafficBytes(t *testing.T) {
	kerneltest.RequireRoot(t)
	top := trafficTopology()
	byteBackends(t, backendsOf(top))
	node := shared.Locality{"region": "r1", "zone": "z1"}
	in, cg := setupWith(t, mustBuild(t, top, 1), Config{Locality: node})
	dir := filepath.Join(cg, "z2")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kerneltest.MoveTo(t, cg); os.Remove(dir) })
	z2 := shared.Locality{"region": "r1", "zone": "z2"}
	if err := in.SetCgroupLocality(dir, z2); err != nil {
		t.Fatal(err)
	}
	want := map[trafficPair]TrafficTotals{}
	for i, src := range []struct {
		dir string
		loc shared.Locality
	}{{cg, node}, {dir, z2}, {cg, node}, {dir, z2}} {
		kerneltest.MoveTo(t, src.dir)
		for j := range 6 {
			n := 1000*i + 7919*j + 3 // up to about 43 KB: several segments
			b, sent, received := exchange(t, "127.77.25.1:80", n, j%2 == 0)
			w := want[trafficPair{fmt.Sprint(src.loc), b}]
			// The kernel's counters (RFC 4898's octets acked and received)
			// grow by the sequence numbers acknowledged and received
			// (net/ipv4/tcp_input.c, tcp_snd_una_update and
			// tcp_rcv_nxt_update), so they count the SYN and the FIN, each
			// acknowledged once the connection closed in order, and the
			// peer's FIN.
			w.Picks++
			w.Sent += sent + 2
			w.Received += received + 1
			want[trafficPair{fmt.Sprint(src.loc), b}] = w
		}
	}
	kerneltest.MoveTo(t, cg)
	exchange(t, "127.0.25.1:9125", 5000, false) // not a VIP: not counted
	exchange(t, "127.0.25.2:9125", 5000, true)
	var got map[trafficPair]TrafficTotals
	kerneltest.Eventually(t, 3*time.Second, "the closed connections' bytes", func() error {
		counts, other, err := in.Traffic()
		if err != nil {
			return err
		}
		got = map[trafficPair]TrafficTotals{}
		for _, c := range counts {
			got[trafficPair{fmt.Sprint(c.Source), c.Backend.String()}] = c.TrafficTotals
		}
		if !maps.Equal(got, want) || other != (TrafficTotals{}) {
			return fmt.Errorf("counts %v (other %v), want %v", got, other, want)
		}
		return nil
	})
	kerneltest.Eventually(t, 3*time.Second, "no socket entries left", func() error {
		var k uint64
		var v bpf.Sock
		n := 0
		for it := in.k.objs.LtSocks.Iterate(); it.Next(&k, &v); {
			n++
		}
		if n != 0 {
			return fmt.Errorf("%d entries in lt_socks after every socket closed", n)
		}
		return nil
	})
}
