package kernel

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/loctree/loctree/bpf"
	bpftest "github.com/loctree/loctree/bpf/tests"
	"github.com/loctree/loctree/internal/testing/kerneltest"
)

// The Go model of consistent_hash in the kernel (bpf/lib/affinity.h), written
// from its description, for the differential tests and the simulation.

// mix64 is the splitmix64 finalizer (Steele, Lea and Flood, "Fast
// Splittable Pseudorandom Number Generators", OOPSLA 2014).
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// affinityHash is the jump hash key of a client (netns cookie) and a
// service frontend.
func affinityHash(client uint64, fe bpf.Frontend) uint64 {
	h := mix64(client)
	h = mix64(h ^ (uint64(fe.Addr[0])<<32 | uint64(fe.Addr[1])))
	h = mix64(h ^ (uint64(fe.Addr[2])<<32 | uint64(fe.Addr[3])))
	return mix64(h ^ (uint64(fe.Port)<<8 | uint64(fe.Family)))
}

// jump is Lamping and Veach's jump consistent hash ("A Fast, Minimal
// Memory, Consistent Hash Algorithm", 2014, Figure 1), with the division
// in integers and at most 64 steps, as the kernel runs it.
func jump(key uint64, n uint32) uint32 {
	var b, j uint64
	for s := 0; s < 64 && j < uint64(n); s++ {
		b = j
		key = key*2862933555777941757 + 1
		j = ((b + 1) << 31) / ((key >> 33) + 1)
	}
	return uint32(b)
}

// paperJump is jump consistent hash as Figure 1 of Lamping and Veach
// (arXiv:1406.2294) prints it, in floating point: the oracle of jump.
func paperJump(key uint64, buckets int32) int32 {
	b, j := int64(-1), int64(0)
	for j < int64(buckets) {
		b = j
		key = key*2862933555777941757 + 1
		j = int64(float64(b+1) * (float64(int64(1)<<31) / float64((key>>33)+1)))
	}
	return int32(b)
}

// TestJumpMatchesPaper: the integer jump the kernel runs gives the paper's
// bucket for random keys and bucket counts up to 2^20.
func TestJumpMatchesPaper(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 1))
	for range 200000 {
		key, n := rng.Uint64(), 1+rng.Uint32N(1<<20)
		if got, want := jump(key, n), paperJump(key, int32(n)); int32(got) != want {
			t.Fatalf("jump(%#x, %d) = %d, the paper's %d", key, n, got, want)
		}
	}
}

// TestKernelJumpMatchesModel is the differential test of the first pick:
// the kernel's hash of (client, service) and its jump bucket
// (bpf/lib/affinity.h, run through BPF_PROG_TEST_RUN) equal the Go model's,
// for random clients, services and candidate counts.
func TestKernelJumpMatchesModel(t *testing.T) {
	kerneltest.RequireRoot(t)
	_, kl := openKernelLookup(t, Capacity{Services: 8, Nodes: 1 << 10, Endpoints: 1 << 10})
	rng := rand.New(rand.NewPCG(12, 2))
	for i := range 5000 {
		var a [4]byte
		binary.BigEndian.PutUint32(a[:], 0x7f4d0000|rng.Uint32N(1<<16))
		fe := FrontendOf(netip.AddrPortFrom(netip.AddrFrom4(a), uint16(1+rng.IntN(65535))))
		n := 1 + rng.Uint32N(1<<uint(1+i%24))
		args := bpftest.NewJump(rng.Uint64(), fe, n)
		if _, err := kl.objs.LtTestJump.Run(&ebpf.RunOptions{Context: args}); err != nil {
			t.Fatalf("run test program: %v", err)
		}
		var out bpftest.Jump
		if err := kl.objs.LtTestJumpOut.Lookup(uint32(0), &out); err != nil {
			t.Fatal(err)
		}
		h := affinityHash(args.Client, fe)
		if out.Hash != h || out.Bucket != jump(h, n) {
			t.Fatalf("client %#x, %v, n %d: kernel hash %#x bucket %d, model %#x bucket %d", args.Client, fe, n, out.Hash, out.Bucket, h, jump(h, n))
		}
	}
}
