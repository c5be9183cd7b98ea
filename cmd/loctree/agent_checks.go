package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/loctree/loctree/internal/topology"
	"github.com/loctree/loctree/shared"
)

// checkLocalityKeys refuses a key that is a scope of no service of the
// topology (a typo such as regoin= would route as if it were not given).
func checkLocalityKeys(flag string, loc shared.Locality, top *shared.Topology, name string) error {
	scopes := topologyScopes(top)
	for k := range loc {
		if !scopes[k] {
			return fmt.Errorf("%s: %q is not a scope of any service in %s (its scopes: %s; nearest: %s)",
				flag, k, name, strings.Join(sortedKeys(scopes), ", "), strings.Join(nearest(k, scopes, 1), ", "))
		}
	}
	return nil
}

func topologyScopes(top *shared.Topology) map[string]bool {
	out := map[string]bool{}
	for _, s := range top.Services {
		scopes := s.Scopes
		if len(scopes) == 0 {
			scopes = shared.DefaultScopes()
		}
		for _, sc := range scopes {
			out[sc] = true
		}
	}
	return out
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// loadAgentTopology reads the agent's topology for the checks above; a
// topology that does not load is left to the agent, which reports it.
func loadAgentTopology(path string) (*shared.Topology, string, bool) {
	top, name, err := topology.LoadOrDefault(path)
	return top, name, err == nil
}
