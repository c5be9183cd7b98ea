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
func checkLocalityKeys(flag string, loc shared.Locality, scopes map[string]bool, name string) error {
	for k := range loc {
		if !scopes[k] {
			return fmt.Errorf("%s: %q is not a scope of any service in %s (its scopes: %s; nearest: %s)",
				flag, k, name, strings.Join(sortedKeys(scopes), ", "), strings.Join(nearest(k, scopes, 1), ", "))
		}
	}
	return nil
}

// addScopes adds a service's scopes (the default ones when it names none)
// to out.
func addScopes(out map[string]bool, s *shared.ServiceSpec) {
	scopes := s.Scopes
	if len(scopes) == 0 {
		scopes = shared.DefaultScopes()
	}
	for _, sc := range scopes {
		out[sc] = true
	}
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// agentScopes reads the scopes of the agent's topology for the checks
// above, decoding one service at a time as the agent's file source does
// (the whole model of a 100,000-endpoint topology would double the agent's
// peak memory for a set of a few names); a topology that does not load is
// left to the agent, which reports it.
func agentScopes(path string) (map[string]bool, string, bool) {
	scopes := map[string]bool{}
	if path == "" {
		top := topology.Default()
		for i := range top.Services {
			addScopes(scopes, &top.Services[i])
		}
		return scopes, topology.DefaultName, true
	}
	ch, err := topology.NewFiles(path).Poll()
	if err != nil || ch == nil {
		return nil, path, false
	}
	err = ch.Each(func(s *shared.ServiceSpec) error {
		addScopes(scopes, s)
		return nil
	})
	return scopes, path, err == nil
}
