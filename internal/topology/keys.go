package topology

import (
	"fmt"
	"slices"
	"strings"

	"github.com/loctree/loctree/shared"
)

// wellKnownKeys are the locality keys an endpoint may carry whatever its
// service routes on: where it runs, as Istio and Kubernetes name it.
var wellKnownKeys = []string{"network", "cluster", "region", "zone", "subzone", "node"}

// wellKnownLabels are the Kubernetes and Istio label keys of the same
// places (k8s.io/api/core/v1 well_known_labels.go; istio.io/api
// label/labels.gen.go), which a file written from a cluster carries: a key
// near one of them is taken for a typo of it.
var wellKnownLabels = []string{
	"topology.kubernetes.io/region", "topology.kubernetes.io/zone", "kubernetes.io/hostname",
	"topology.istio.io/subzone", "topology.istio.io/network", "topology.istio.io/cluster",
	"failure-domain.beta.kubernetes.io/region", "failure-domain.beta.kubernetes.io/zone",
}

// checkLocalityKeys checks an endpoint's locality keys against its
// service's scopes (docs/TOPOLOGY.md, "Locality keys"). A key that takes no
// part in routing is refused when it is likely a typo, which would
// silently route the endpoint as if that value were empty:
//   - a well-known key or a scope of the service is used;
//   - a qualified label key (prefix/name, valid as a Kubernetes label key)
//     that no scope uses is accepted (a mesh-wide file carries every label
//     while each service routes on its own), unless it is near a
//     well-known Kubernetes or Istio key or a scope;
//   - a bare key is refused: with the key meant when it is near one,
//     else with the advice to qualify it.
func checkLocalityKeys(s *shared.ServiceSpec) error {
	known := slices.Clone(wellKnownKeys)
	for _, sc := range s.Scopes {
		k, _, _ := strings.Cut(sc, "=") // failoverPriority "label=value" reads label
		if !slices.Contains(known, k) {
			known = append(known, k)
		}
	}
	for _, e := range s.Endpoints {
		for _, k := range sortedKeys(e.Locality) {
			if err := checkLocalityKey(k, known); err != nil {
				return fmt.Errorf("service %q: endpoint %s: %w", s.Name, e.Address, err)
			}
		}
	}
	return nil
}

// checkLocalityKey applies the rule above to one key; known are the
// well-known keys and the service's scopes.
func checkLocalityKey(k string, known []string) error {
	if slices.Contains(known, k) {
		return nil
	}
	near := nearest(k, append(slices.Clone(known), wellKnownLabels...))
	if !strings.Contains(k, "/") {
		if near != "" {
			return fmt.Errorf("unknown locality key %q (known: %s)%s", k, strings.Join(known, ", "), near)
		}
		return fmt.Errorf("unknown locality key %q (known: %s): a bare key must be a well-known key or a scope of the service; "+
			"qualify it (example.com/%s) to carry a label no scope uses", k, strings.Join(known, ", "), k)
	}
	if err := shared.CheckLabelKey(k); err != nil {
		return fmt.Errorf("locality key %w", err)
	}
	if near != "" {
		return fmt.Errorf("unknown locality key %q, near a key loctree or the service knows%s", k, near)
	}
	return nil
}

func sortedKeys(loc shared.Locality) []string {
	keys := make([]string, 0, len(loc))
	for k := range loc {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// nearest suggests the key closest to k by edit distance, if any is close:
// within half of k's length for a short key, within 2 for a qualified one.
func nearest(k string, keys []string) string {
	limit := len(k)/2 + 1
	if strings.Contains(k, "/") || len(k) > 12 {
		limit = 3
	}
	best, bestD := "", limit
	for _, c := range keys {
		if d := EditDistance(k, c); d < bestD && d > 0 {
			best, bestD = c, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf("; did you mean %q?", best)
}

// EditDistance is the Levenshtein distance of a and b, by bytes: how far a
// name is from one the topology knows, for "did you mean" suggestions.
func EditDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
