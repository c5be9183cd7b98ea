package kernel

import (
	"encoding/binary"
	"fmt"

	"github.com/loctree/loctree/bpf"
	"github.com/loctree/loctree/shared"
	"github.com/loctree/loctree/shared/wire"
)

// writeAffinityEps lets the kernel find a consistent_hash service's
// backends by address (bpf/lib/affinity.h): (frontend, backend) → the map index
// of its endpoint record in the region at base. Written before the service
// is published, so a client's backend that stays in the service is found
// however the update moved it. Old entries need no delete: the kernel uses
// an index only where the endpoint there has that address and is a
// candidate.
func (in *Installer) writeAffinityEps(p plan, eps []byte, base uint32) error {
	if p.svc.Policy() != shared.PolicyConsistentHash || len(eps) == 0 {
		return nil
	}
	n := len(eps) / wire.EndpointRecordSize
	keys, idx := make([]bpf.AffinityEpKey, n), make([]uint32, n)
	for i := range n {
		keys[i] = bpf.AffinityEpKey{Fe: p.fe, Backend: backendAt(eps[i*wire.EndpointRecordSize:])}
		idx[i] = base + uint32(i)
	}
	if _, err := in.k.objs.LtAffEps.BatchUpdate(keys, idx, nil); err != nil {
		return fmt.Errorf("write affinity endpoints of %s: %w", p.svc.Name(), err)
	}
	return nil
}

// backendAt is the backend of an endpoint record: its first 19 bytes are
// laid out as struct lt_addr's (docs/FORMAT.md "Endpoint record").
func backendAt(rec []byte) bpf.Backend {
	var b bpf.Backend
	for i := range b.Addr {
		b.Addr[i] = binary.NativeEndian.Uint32(rec[4*i:])
	}
	b.Port = binary.NativeEndian.Uint16(rec[16:])
	b.Family = rec[18]
	return b
}
