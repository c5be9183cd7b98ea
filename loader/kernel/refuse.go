package kernel

import (
	"fmt"
	"maps"

	"github.com/loctree/loctree/shared"
)

// Refusal is why the kernel does not install service s (an error wrapping
// ErrNotInKernel), or nil. Such a service stays in the tree the agent
// serves to the filters, which honour it; connections to its VIP are not
// redirected.
func Refusal(s *shared.Service) error {
	if _, _, ok := s.LoadAware(); ok {
		return fmt.Errorf("service %q: load_aware is %w; its VIP is not redirected (the filter honours it); remove load_aware to serve the service in the kernel", s.Name(), ErrNotInKernel)
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
