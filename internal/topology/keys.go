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

// checkLocalityKeys refuses an endpoint locality key that is neither a
// well-known locality key nor one of its service's scopes: such a key takes
// no part in routing, so a typo (`regoin:`, or `rack:` for a service that
// routes on `subzone`) would silently route the endpoint as if that value
// were empty. The error names the key, the keys known here and the nearest.
func checkLocalityKeys(s *shared.ServiceSpec) error {
	known := slices.Clone(wellKnownKeys)
	for _, sc := range s.Scopes {
		k, _, _ := strings.Cut(sc, "=") // failoverPriority "label=value" reads label
		if !slices.Contains(known, k) {
			known = append(known, k)
		}
	}
	for _, e := range s.Endpoints {
		for k := range e.Locality {
			if slices.Contains(known, k) {
				continue
			}
			return fmt.Errorf("service %q: endpoint %s: unknown locality key %q (known: %s; a label key is known once a scope of the service names it)%s",
				s.Name, e.Address, k, strings.Join(known, ", "), nearest(k, known))
		}
	}
	return nil
}

// nearest suggests the key closest to k by edit distance, if any is close.
func nearest(k string, keys []string) string {
	best, bestD := "", len(k)/2+1
	for _, c := range keys {
		if d := EditDistance(k, c); d < bestD {
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
