package main

import (
	"github.com/loctree/loctree/shared"
)

// pick chooses one endpoint of the candidate range r with the service's
// policy (shared's pickers, the same as every loctree data plane). key is
// the consistent-hash key; without one a random key spreads requests.
func (st *treeState) pick(svc *shared.Service, r shared.Range, key uint64, hasKey bool) uint32 {
	if !hasKey && svc.Policy() == shared.PolicyConsistentHash {
		key = uint64(st.randN(1<<31))<<32 | uint64(st.randN(1<<31))
	}
	ep, ok := st.picker.Pick(svc, r, key)
	if !ok {
		return r.Lo
	}
	return ep
}

// pickLoads chooses one endpoint of a spillover service by the proxy's
// priority loads (shared's Picker.PickLoads, as tree pick and the Go
// balancers do); ok is false when the chosen priority has no endpoint.
func (st *treeState) pickLoads(svc *shared.Service, l *shared.Loads, key uint64, hasKey bool) (uint32, bool) {
	if !hasKey && svc.Policy() == shared.PolicyConsistentHash {
		key = uint64(st.randN(1<<31))<<32 | uint64(st.randN(1<<31))
	}
	return st.picker.PickLoads(svc, l, key)
}

// fallbacks returns up to n further distinct candidates after primary, in
// ring order inside r.
func fallbacks(r shared.Range, primary uint32, n int) []uint32 {
	size := uint32(r.Len())
	var out []uint32
	for k := uint32(1); k < size && len(out) < n; k++ {
		out = append(out, r.Lo+(primary-r.Lo+k)%size)
	}
	return out
}
