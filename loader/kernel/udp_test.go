package kernel

import (
	"net"
	"net/netip"
	"slices"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/shared"
)

// TestUDPSendmsg: an unconnected UDP datagram to a VIP is redirected to a
// candidate (sendmsg4) and the reply appears to come from the VIP
// (recvmsg4).
func TestUDPSendmsg(t *testing.T) {
	kerneltest.RequireRoot(t)
	top := mesh()
	kerneltest.Backends(t, backendsOf(top))
	tree, _ := shared.Build(top, shared.BuildOptions{Generation: 1})
	src := shared.Locality{"region": "r1", "zone": "z1"}
	setup(t, tree, src)
	svc, _ := tree.Service("reviews")
	want := candidates(tree, svc, src)
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	vip := net.UDPAddrFromAddrPort(svc.VIP())
	buf := make([]byte, 64)
	for range 20 {
		if _, err := pc.WriteTo([]byte("hi"), vip); err != nil {
			t.Fatal(err)
		}
		pc.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(buf[:n]); !slices.Contains(want, got) {
			t.Fatalf("datagram reached %s, candidates %v", got, want)
		}
		if from.String() != svc.VIP().String() {
			t.Fatalf("reply from %s, want the VIP %s", from, svc.VIP())
		}
	}
}

// TestGetpeername: a connected TCP or UDP socket reports the VIP as its
// peer, not the backend.
func TestGetpeername(t *testing.T) {
	kerneltest.RequireRoot(t)
	top := mesh()
	kerneltest.Backends(t, backendsOf(top))
	tree, _ := shared.Build(top, shared.BuildOptions{Generation: 1})
	setup(t, tree, shared.Locality{"region": "r1", "zone": "z1"})
	svc, _ := tree.Service("reviews")
	for _, network := range []string{"tcp4", "udp4"} {
		c, err := net.DialTimeout(network, svc.VIP().String(), 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if got := peer(t, c); got != svc.VIP() {
			t.Errorf("%s getpeername = %s, want the VIP %s", network, got, svc.VIP())
		}
		if network == "udp4" {
			c.Write([]byte("hi"))
			c.SetReadDeadline(time.Now().Add(2 * time.Second))
			buf := make([]byte, 64)
			n, err := c.Read(buf)
			if err != nil || !slices.Contains(candidates(tree, svc, shared.Locality{"region": "r1", "zone": "z1"}), string(buf[:n])) {
				t.Errorf("connected UDP: %q, %v", buf[:n], err)
			}
		}
		c.Close()
	}
}

func peer(t *testing.T, c net.Conn) netip.AddrPort {
	t.Helper()
	rc, err := c.(interface {
		SyscallConn() (syscall.RawConn, error)
	}).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var sa unix.Sockaddr
	var serr error
	rc.Control(func(fd uintptr) { sa, serr = unix.Getpeername(int(fd)) })
	if serr != nil {
		t.Fatal(serr)
	}
	in4, ok := sa.(*unix.SockaddrInet4)
	if !ok {
		t.Fatalf("peer %T", sa)
	}
	return netip.AddrPortFrom(netip.AddrFrom4(in4.Addr), uint16(in4.Port))
}
