package kernel

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/shared"
)

// dnsTopology is one UDP service with two random-policy endpoints in the
// source's zone: every datagram has two candidates.
func dnsTopology(backends ...string) *shared.Topology {
	spec := shared.ServiceSpec{Name: "dns", VIP: "127.77.0.53:5353", Scopes: []string{"region", "zone"}}
	for _, b := range backends {
		spec.Endpoints = append(spec.Endpoints, ep(b, "r1", "z1"))
	}
	return &shared.Topology{Services: []shared.ServiceSpec{spec}}
}

// TestUDPDatagramsInFlight: one unconnected UDP socket sends two datagrams
// to a VIP back to back and reads both replies afterwards, as a resolver
// sending its A and AAAA queries at once does. Both replies must be shown
// from the VIP: a reply from a backend address is dropped by the
// application as an answer from a server it never asked. 10,000 rounds on
// IPv4, and 1,000 each on IPv6 and on an IPv6 socket to the IPv4 VIP
// (v4-mapped).
func TestUDPDatagramsInFlight(t *testing.T) {
	kerneltest.RequireRoot(t)
	v4 := []string{"127.0.53.1:5353", "127.0.53.2:5353"}
	v6 := []string{"[::1]:20053", "[::1]:20054"}
	kerneltest.Backends(t, append(slices.Clone(v4), v6...))
	top := dnsTopology(v4...)
	six := dnsTopology(v6...).Services[0]
	six.Name, six.VIP = "dns6", "[::1]:5353"
	top.Services = append(top.Services, six)
	setup(t, mustBuild(t, top, 1), shared.Locality{"region": "r1", "zone": "z1"})
	rounds := 10000
	if testing.Short() {
		rounds = 1000
	}
	t.Run("udp4", func(t *testing.T) { inFlight(t, "udp4", "127.0.0.1", "127.77.0.53:5353", v4, rounds) })
	t.Run("udp6", func(t *testing.T) { inFlight(t, "udp6", "::1", "[::1]:5353", v6, 1000) })
	t.Run("v4-mapped", func(t *testing.T) { inFlight(t, "udp", "::", "127.77.0.53:5353", v4, 1000) })
}

// inFlight sends two datagrams at once to vip from a new socket of network
// bound to local, rounds times, and counts the replies lost or shown from
// anything but the VIP.
func inFlight(t *testing.T, network, local, vip string, backends []string, rounds int) {
	to := net.UDPAddrFromAddrPort(netip.MustParseAddrPort(vip))
	var lost, fromBackend int
	buf := make([]byte, 64)
	for round := range rounds {
		pc, err := net.ListenUDP(network, &net.UDPAddr{IP: net.ParseIP(local)})
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{"A", "AAAA"} {
			if _, err := pc.WriteToUDP([]byte(q), to); err != nil {
				t.Fatalf("round %d: send: %v", round, err)
			}
		}
		for range 2 {
			pc.SetReadDeadline(time.Now().Add(2 * time.Second))
			n, from, err := pc.ReadFromUDP(buf)
			switch {
			case err != nil:
				lost++
			case netip.AddrPortFrom(from.AddrPort().Addr().Unmap(), from.AddrPort().Port()) != to.AddrPort():
				fromBackend++
			case !slices.Contains(backends, string(buf[:n])):
				t.Fatalf("round %d: reply %q from no backend", round, buf[:n])
			}
		}
		pc.Close()
	}
	if lost+fromBackend > 0 {
		t.Fatalf("%d rounds, %d replies: %d lost, %d shown from a backend address instead of the VIP %s",
			rounds, 2*rounds, lost, fromBackend, vip)
	}
	t.Logf("%d rounds, %d replies, all from the VIP", rounds, 2*rounds)
}

// TestUDPResolver: Go's resolver (PreferGo), its dialer pointed at a DNS
// service VIP with two responders behind it, resolves a name 1,000 times
// without a failure. It sends the A and AAAA queries at once.
func TestUDPResolver(t *testing.T) {
	kerneltest.RequireRoot(t)
	backends := []string{"127.0.53.3:5353", "127.0.53.4:5353"}
	for _, b := range backends {
		dnsResponder(t, b)
	}
	tree := mustBuild(t, dnsTopology(backends...), 1)
	setup(t, tree, shared.Locality{"region": "r1", "zone": "z1"})
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, "127.77.0.53:5353")
	}}
	for i := range 1000 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		addrs, err := r.LookupHost(ctx, "reviews.loctree.test")
		cancel()
		if err != nil || !slices.Contains(addrs, "127.0.0.9") {
			t.Fatalf("lookup %d: %v %v", i, addrs, err)
		}
	}
}

// dnsResponder answers every A query with 127.0.0.9 and every other query
// with no records, on UDP at addr.
func dnsResponder(t *testing.T, addr string) {
	t.Helper()
	pc, err := net.ListenPacket("udp4", addr)
	if err != nil {
		t.Fatalf("dns responder %s: %v", addr, err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if reply, err := dnsAnswer(buf[:n]); err == nil {
				pc.WriteTo(reply, from)
			}
		}
	}()
}

func dnsAnswer(query []byte) ([]byte, error) {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil, err
	}
	q, err := p.Question()
	if err != nil {
		return nil, err
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true})
	b.StartQuestions()
	b.Question(q)
	b.StartAnswers()
	if q.Type == dnsmessage.TypeA {
		rh := dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 5}
		if err := b.AResource(rh, dnsmessage.AResource{A: [4]byte{127, 0, 0, 9}}); err != nil {
			return nil, fmt.Errorf("answer: %w", err)
		}
	}
	return b.Finish()
}
