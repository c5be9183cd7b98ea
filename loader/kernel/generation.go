package kernel

import (
	"fmt"

	"github.com/cilium/ebpf"
)

// mapGeneration is the pinned map (created by the agent; the programs do
// not use it) that holds the generation of the last applied tree. A tree
// whose changes are all in services without a VIP writes nothing else in
// the kernel, yet the filters were served that generation: an agent
// restarted afterwards must continue after it, or it would serve other
// content under an ETag the filters already hold, and they would keep it.
const mapGeneration = "lt_generation"

// openGeneration creates or re-adopts the generation map.
func openGeneration(pinDir string) (*ebpf.Map, error) {
	spec := &ebpf.MapSpec{Name: mapGeneration, Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 1}
	var opts ebpf.MapOptions
	if pinDir != "" {
		spec.Pinning, opts.PinPath = ebpf.PinByName, pinDir
	}
	m, err := ebpf.NewMapWithOptions(spec, opts)
	if err != nil {
		return nil, fmt.Errorf("generation map: %w", err)
	}
	return m, nil
}

// savedGeneration is the generation of the last tree applied on these maps.
func (k *kernel) savedGeneration() (uint64, error) {
	var g uint64
	if err := k.gen.Lookup(uint32(0), &g); err != nil {
		return 0, fmt.Errorf("read generation map: %w", err)
	}
	return g, nil
}

func (k *kernel) saveGeneration(g uint64) error {
	if err := k.gen.Update(uint32(0), g, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("write generation map: %w", err)
	}
	return nil
}
