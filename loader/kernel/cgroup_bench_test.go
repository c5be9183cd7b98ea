package kernel

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/loctree/loctree/shared"
)

// BenchmarkConnectCgroupLocality is BenchmarkConnect at 1,000 endpoints
// with the sockets' cgroup given its own locality (the node's, so the
// candidates are the same): every connect searches the cgroup levels for
// it, and the traffic counter searches them again for the source's id.
func BenchmarkConnectCgroupLocality(b *testing.B) {
	const port = 9301
	acceptors(b, port)
	in, cg := attachedInstaller(b)
	top := &shared.Topology{Services: []shared.ServiceSpec{bigService("big", "127.77.3.1:80", 1000, port)}}
	if _, err := in.Apply(mustBuild(b, top, 1)); err != nil {
		b.Fatal(err)
	}
	if err := in.SetCgroupLocality(cg, benchLocality); err != nil {
		b.Fatal(err)
	}
	direct := &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}, Port: port}
	vip := &unix.SockaddrInet4{Addr: [4]byte{127, 77, 3, 1}, Port: 80}
	compareConnects(b, cg, vip, direct)
}
