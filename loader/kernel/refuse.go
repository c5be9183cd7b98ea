package kernel

import (
	"fmt"
	"maps"

	"github.com/loctree/loctree/shared"
)

// Refusal is why the kernel does not install service s (an error wrapping
// ErrNotInKernel), or nil. Such a service stays in the tree the agent
// serves to the filters, which honour it; connections to its VIP are not
// redirected. The kernel implements every setting a tree can hold but
// the classes before the locality (format 8: a spillover service with two
// or more scopes before its first locality scope), which the filter
// honours first.
func Refusal(s *shared.Service) error {
	if s.ClassesBeforeLocality() {
		return fmt.Errorf("service %q: %w: scopes %v put two or more scopes before the locality, whose classes the kernel does not walk yet; the filter serves it", s.Name(), ErrNotInKernel, s.Scopes())
	}
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
