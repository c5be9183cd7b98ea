package loader

import (
	"github.com/loctree/loctree/bpf"
)

// The Go model of consistent_hash in the kernel (bpf/affinity.h), written
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
