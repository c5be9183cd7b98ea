package kernel

import (
	"maps"

	"github.com/loctree/loctree/shared"
)

// Refusal is why the kernel does not install service s (an error wrapping
// ErrNotInKernel), or nil. Such a service stays in the tree the agent
// serves to the filters, which honour it; connections to its VIP are not
// redirected. The kernel implements every setting a tree can hold today
// (classes before the locality since bpf/lib/priority.h lt_group), so it
// is always nil; a setting the filter honours before the kernel does is
// refused here.
func Refusal(s *shared.Service) error {
	return nil
}

// refuse records s as refused by the tree being applied when the kernel
// does not install it.
func (in *Installer) refuse(s *shared.Service) bool {
	err := Refusal(s)
	if err != nil {
		in.pending[s.Name()] = err
	}
	return err != nil
}

// refusals is a copy of the refused services, nil when there is none.
func (in *Installer) refusals() map[string]error {
	if len(in.refused) == 0 {
		return nil
	}
	return maps.Clone(in.refused)
}
