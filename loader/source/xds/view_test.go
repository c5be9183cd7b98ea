package xds

import (
	"context"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/loctree/loctree/loader/source"
	"github.com/loctree/loctree/shared"
)

// view is the state an agent applying every update of a source holds: the
// tree services by name, and its node's locality.
type view struct {
	mu       sync.Mutex
	specs    map[string]shared.ServiceSpec
	locality shared.Locality
	updates  int
	changed  []string         // every name of every update, in order
	history  map[string][]int // every service's endpoint count after each update that named it (-1: removed)
}

// runView runs src until the test ends, applying every update to a view.
func runView(t testing.TB, src source.Source) *view {
	t.Helper()
	v := &view{specs: map[string]shared.ServiceSpec{}, history: map[string][]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, v.apply) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("source Run: %v", err)
		}
	})
	return v
}

func (v *view) apply(u source.Update) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, name := range u.Changed {
		n := -1
		if sp, err := u.Services.Spec(name); err == nil {
			v.specs[name] = *sp
			n = len(sp.Endpoints)
		} else {
			delete(v.specs, name)
		}
		v.history[name] = append(v.history[name], n)
	}
	if u.Locality != nil {
		v.locality = u.Locality
	}
	v.updates++
	v.changed = append(v.changed, u.Changed...)
	return nil
}

// spec returns a service's spec, false when the view has none.
func (v *view) spec(name string) (shared.ServiceSpec, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	sp, ok := v.specs[name]
	return sp, ok
}

func (v *view) names() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Sorted(maps.Keys(v.specs))
}

// waitFor polls the view until cond holds.
func (v *view) waitFor(t testing.TB, d time.Duration, what string, cond func(v *view) bool) {
	t.Helper()
	within(t, d, what, func() bool { return cond(v) })
}

// candidates are the endpoints the tree gives a source of locality loc for
// the service: the addresses in its lookup range.
func candidates(t testing.TB, sp shared.ServiceSpec, loc shared.Locality) []string {
	t.Helper()
	tree, err := shared.Build(&shared.Topology{Services: []shared.ServiceSpec{sp}}, shared.BuildOptions{})
	if err != nil {
		t.Fatalf("build %s: %v", sp.Name, err)
	}
	svc, ok := tree.Service(sp.Name)
	if !ok {
		t.Fatalf("no %s in its tree", sp.Name)
	}
	r := svc.Lookup(loc)
	var out []string
	for i := r.Lo; i < r.Hi; i++ {
		out = append(out, tree.Endpoint(i).Addr.String())
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// endpointCount is the number of endpoints of a service in the view, -1
// when it has none.
func (v *view) endpointCount(name string) int {
	sp, ok := v.spec(name)
	if !ok {
		return -1
	}
	return len(sp.Endpoints)
}

// counts is a service's endpoint count after each update that named it.
func (v *view) counts(name string) []int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.history[name])
}

// healthy is a service's healthy endpoint addresses, sorted.
func (v *view) healthy(name string) []string {
	sp, _ := v.spec(name)
	var out []string
	for _, ep := range sp.Endpoints {
		if ep.Healthy == nil || *ep.Healthy {
			out = append(out, ep.Address)
		}
	}
	slices.Sort(out)
	return out
}
