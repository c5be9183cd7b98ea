package loader

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/loctree/loctree/internal/kerneltest"
	"github.com/loctree/loctree/shared"
)

// TestCgroupLocality: workloads in a cgroup with their own locality (below
// the cgroup the programs are attached to) are balanced for that locality,
// the rest for the node's.
func TestCgroupLocality(t *testing.T) {
	kerneltest.RequireRoot(t)
	top := mesh()
	kerneltest.Backends(t, backendsOf(top))
	tree := mustBuild(t, top, 1)
	node := shared.Locality{"region": "r1", "zone": "z1"}
	in, cg := setupWith(t, tree, Config{Locality: node})
	pod := filepath.Join(cg, "gateway")
	if err := os.Mkdir(pod, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // before the cgroup's own cleanup
		kerneltest.MoveTo(t, cg)
		os.Remove(pod)
	})
	gw := shared.Locality{"region": "r2", "zone": "z3", "rack": "ignored"}
	if err := in.SetCgroupLocality(pod, gw); err != nil {
		t.Fatal(err)
	}
	reviews, _ := tree.Service("reviews")
	askAll := func(src shared.Locality) {
		t.Helper()
		want := candidates(tree, reviews, src)
		for range 10 {
			got, err := kerneltest.Ask(reviews.VIP.String())
			if err != nil || !slices.Contains(want, got) {
				t.Fatalf("source %v: reached %q (%v), candidates %v", src, got, err, want)
			}
		}
	}
	askAll(node)
	kerneltest.MoveTo(t, pod)
	askAll(gw)
	if err := in.ClearCgroupLocality(pod); err != nil {
		t.Fatal(err)
	}
	askAll(node)
}
