package kernel

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/loctree/loctree/bpf"
	"github.com/loctree/loctree/internal/testing/kerneltest"
)

// BenchmarkTraffic is the agent's read of the traffic counts (at each
// scrape and before each install) with the map holding n keys.
func BenchmarkTraffic(b *testing.B) {
	kerneltest.RequireRoot(b)
	in, err := Open(Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		b.Fatal(err)
	}
	per := make([]bpf.TrafficVal, cpus)
	for _, n := range []int{100, 1000, 16384} {
		for i := range n {
			k := bpf.TrafficKey{Src: uint64(i % 7), Fe: FrontendOf(netipAddrPort(i)), Backend: FrontendOf(netipAddrPort(i + 1<<20))}
			if err := in.k.objs.LtTraffic.Put(&k, per); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			for b.Loop() {
				if c, _, err := in.Traffic(); err != nil || len(c) != n {
					b.Fatal(len(c), err)
				}
			}
		})
	}
}

// netipAddrPort is a distinct loopback address and port per i.
func netipAddrPort(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, byte(i >> 16), byte(i >> 8), byte(i)}), 80)
}
