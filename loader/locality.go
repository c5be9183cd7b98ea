package loader

import (
	"fmt"
	"strings"

	"github.com/loctree/loctree/shared"
)

// ParseLocality parses "scope=value,scope=value" (e.g.
// "region=us-east1,zone=us-east1-b") into a locality.
func ParseLocality(s string) (shared.Locality, error) {
	loc := shared.Locality{}
	if strings.TrimSpace(s) == "" {
		return loc, nil
	}
	for kv := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("locality %q: want scope=value pairs separated by commas, got %q", s, kv)
		}
		if strings.Contains(v, "=") {
			return nil, fmt.Errorf("locality %q: the value %q of %s holds '=': separate scope=value pairs with commas (region=r1,zone=z1)", s, v, k)
		}
		if _, dup := loc[k]; dup {
			return nil, fmt.Errorf("locality %q: scope %q given twice", s, k)
		}
		loc[k] = v
	}
	return loc, nil
}

// ParseCgroupLocality parses "CGROUP_DIR:scope=value,..." (the agent's
// --cgroup-locality flag).
func ParseCgroupLocality(s string) (string, shared.Locality, error) {
	dir, spec, ok := strings.Cut(s, ":")
	if !ok || dir == "" {
		return "", nil, fmt.Errorf("cgroup locality %q: want CGROUP_DIR:scope=value,...", s)
	}
	loc, err := ParseLocality(spec)
	if err != nil {
		return "", nil, err
	}
	return dir, loc, nil
}
