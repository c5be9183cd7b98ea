package shared

const (
	fnvOffset64 = 0xcbf29ce484222325
	fnvPrime64  = 0x100000001b3
)

// Label is the FNV-1a 64 hash of a scope value: the key a tree node is found by.
// Labels are stable across builds and processes, so the kernel, the filter and
// the agent agree on them without sharing a string table.
func Label(value string) uint64 {
	h := uint64(fnvOffset64)
	for i := 0; i < len(value); i++ {
		h ^= uint64(value[i])
		h *= fnvPrime64
	}
	return h
}
