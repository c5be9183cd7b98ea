package kernel

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/shared"
)

// TestCgroupLocality: workloads in a cgroup with their own locality, or
// below one (a pod's containers), are balanced for the nearest such
// locality; the rest for the node's.
func TestCgroupLocality(t *testing.T) {
	kerneltest.RequireRoot(t)
	top := mesh()
	kerneltest.Backends(t, backendsOf(top))
	tree := mustBuild(t, top, 1)
	node := shared.Locality{"region": "r1", "zone": "z1"}
	in, cg := setupWith(t, tree, Config{Locality: node})
	gw := filepath.Join(cg, "gateway")
	container := filepath.Join(gw, "container")
	pod := filepath.Join(gw, "pod")
	for _, dir := range []string{gw, container, pod} {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { // before the cgroup's own cleanup
		kerneltest.MoveTo(t, cg)
		os.Remove(container)
		os.Remove(pod)
		os.Remove(gw)
	})
	gwLoc := shared.Locality{"region": "r2", "zone": "z3", "rack": "ignored"}
	podLoc := shared.Locality{"region": "r1", "zone": "z2"}
	for dir, loc := range map[string]shared.Locality{gw: gwLoc, pod: podLoc} {
		if err := in.SetCgroupLocality(dir, loc); err != nil {
			t.Fatal(err)
		}
	}
	reviews, _ := tree.Service("reviews")
	tests := []struct {
		name string
		dir  string
		src  shared.Locality
	}{
		{"node", cg, node},
		{"gateway", gw, gwLoc},
		{"below the gateway", container, gwLoc},
		{"nearest wins", pod, podLoc},
	}
	for _, tt := range tests {
		kerneltest.MoveTo(t, tt.dir)
		askAll(t, tree, reviews, tt.src)
	}
	if err := in.ClearCgroupLocality(gw); err != nil {
		t.Fatal(err)
	}
	kerneltest.MoveTo(t, container)
	askAll(t, tree, reviews, node)
}

// askAll connects to s's VIP ten times and checks every connection lands
// in the candidates for src.
func askAll(t *testing.T, tree *shared.Tree, s *shared.Service, src shared.Locality) {
	t.Helper()
	want := candidates(tree, s, src)
	for range 10 {
		got, err := kerneltest.Ask(s.VIP().String())
		if err != nil || !slices.Contains(want, got) {
			t.Fatalf("source %v: reached %q (%v), candidates %v", src, got, err, want)
		}
	}
}
