package kernel

import (
	"fmt"
	"testing"

	"github.com/loctree/loctree/internal/testing/kerneltest"
	"github.com/loctree/loctree/shared"
)

// TestKernelAppliesBuildTimePolicies: Istio's localityLbSetting.enabled:
// false (locality_lb) and failoverPriority overrides ("label=value" scopes)
// are encoded by the builder into ordinary scope values, so the unchanged
// kernel lookup applies them: it gives the same range as shared for every
// source, and that range is Istio's.
func TestKernelAppliesBuildTimePolicies(t *testing.T) {
	kerneltest.RequireRoot(t)
	in, kl := openKernelLookup(t, Capacity{Services: 8, Nodes: 1 << 10, Endpoints: 1 << 10})
	off := false
	var offEps, ovEps []shared.EndpointSpec
	for i := range 12 {
		loc := shared.Locality{"network": fmt.Sprintf("n%d", i%3), "region": fmt.Sprintf("r%d", i%2)}
		offEps = append(offEps, shared.EndpointSpec{Address: fmt.Sprintf("127.0.40.%d:80", i+1), Locality: loc})
		ovEps = append(ovEps, shared.EndpointSpec{Address: fmt.Sprintf("127.0.41.%d:80", i+1), Locality: loc})
	}
	top := &shared.Topology{Services: []shared.ServiceSpec{
		{Name: "off", VIP: "127.77.9.1:80", LocalityLB: &off, Mode: "strict", Endpoints: offEps},
		{Name: "override", VIP: "127.77.9.2:80", Scopes: []string{"network=n1", "region"}, Endpoints: ovEps},
	}}
	tree, err := shared.Build(top, shared.BuildOptions{Generation: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.Apply(tree); err != nil {
		t.Fatal(err)
	}
	offSvc, _ := tree.Service("off")
	ovSvc, _ := tree.Service("override")
	for _, src := range []shared.Locality{{}, {"network": "n2", "region": "r1"}, {"network": "n1", "region": "r0"}, {"region": "r9"}} {
		compare(t, kl, in, offSvc, src)
		compareCgroup(t, kl, in, offSvc, src)
		compare(t, kl, in, ovSvc, src)
		compareCgroup(t, kl, in, ovSvc, src)
		if r := offSvc.Lookup(src); r.Len() != 12 {
			t.Fatalf("locality_lb false, source %v: %d candidates, want all 12", src, r.Len())
		}
		// Istio: network must be n1 whatever the source's; then region.
		want := 0
		for _, e := range ovEps {
			if e.Locality["network"] == "n1" && (src["region"] == "" || e.Locality["region"] == src["region"] || src["region"] == "r9") {
				want++
			}
		}
		if r := ovSvc.Lookup(src); r.Len() != want {
			t.Fatalf("override, source %v: %d candidates, want %d (network n1, then the source's region)", src, r.Len(), want)
		}
	}
}
