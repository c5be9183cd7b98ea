package kernel

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/shared"
)

// TestConnect6: an IPv6 VIP (on ::1, so nothing can leave the machine) is
// redirected by connect6 and, for UDP, sendmsg6/recvmsg6, and an IPv6 socket dialing an IPv4 VIP as
// ::ffff:a.b.c.d reaches an IPv4 candidate, v4-mapped.
func TestConnect6(t *testing.T) {
	kerneltest.RequireRoot(t)
	top := mesh()
	top.Services = append(top.Services, shared.ServiceSpec{
		Name: "v6", VIP: "[::1]:7777", Scopes: []string{"region", "zone"},
		Endpoints: []shared.EndpointSpec{ep("[::1]:20001", "r1", "z1"), ep("[::1]:20002", "r1", "z2")},
	})
	kerneltest.Backends(t, backendsOf(top))
	tree, err := shared.Build(top, shared.BuildOptions{Generation: 1})
	if err != nil {
		t.Fatal(err)
	}
	src := shared.Locality{"region": "r1", "zone": "z2"}
	setup(t, tree, src)
	for range 10 {
		if got, err := kerneltest.Ask("[::1]:7777"); err != nil || got != "[::1]:20002" {
			t.Fatalf("IPv6 VIP: %q, %v; want [::1]:20002", got, err)
		}
	}
	pc, err := net.ListenPacket("udp6", "[::1]:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	buf := make([]byte, 64)
	for range 5 {
		if _, err := pc.WriteTo([]byte("hi"), &net.UDPAddr{IP: net.IPv6loopback, Port: 7777}); err != nil {
			t.Fatal(err)
		}
		pc.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, from, err := pc.ReadFrom(buf)
		if err != nil || string(buf[:n]) != "[::1]:20002" || from.String() != "[::1]:7777" {
			t.Fatalf("UDP to the IPv6 VIP: %q from %v (%v); want [::1]:20002 from the VIP", buf[:n], from, err)
		}
	}
	reviews, _ := tree.Service("reviews")
	want := candidates(tree, reviews, src)
	for range 10 {
		got, err := askMapped(netip.MustParseAddr("::ffff:127.77.0.1"), 80)
		if err != nil || !slices.Contains(want, got) {
			t.Fatalf("v4-mapped VIP reached %q (%v), candidates %v", got, err, want)
		}
	}
}

// askMapped connects an AF_INET6 socket (Go dials IPv4 with AF_INET) and
// returns what the backend says, checking that getpeername shows the VIP.
func askMapped(addr netip.Addr, port int) (string, error) {
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	tv := unix.NsecToTimeval((2 * time.Second).Nanoseconds())
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	if err := connectRetry(fd, &unix.SockaddrInet6{Addr: addr.As16(), Port: port}); err != nil {
		return "", err
	}
	sa, err := unix.Getpeername(fd)
	if err != nil {
		return "", err
	}
	if p, ok := sa.(*unix.SockaddrInet6); !ok || p.Addr != addr.As16() || p.Port != port {
		return "", fmt.Errorf("getpeername = %+v, want the VIP", sa)
	}
	buf := make([]byte, 64)
	n, err := readRetry(fd, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}
