package shared

import "testing"

// TestRequestNames: the names a request's service is looked up by, for
// the cluster names Istio gives Envoy (istio/istio pilot/pkg/model
// service.go BuildSubsetKey: "outbound|PORT|SUBSET|HOST"; inbound clusters
// have no HOST), Envoy's own (BlackHoleCluster, PassthroughCluster), and
// authorities.
func TestRequestNames(t *testing.T) {
	for _, c := range []struct {
		key           string
		fromCluster   bool
		first, second string
	}{
		{"outbound|9080||reviews.default.svc.cluster.local", true, "reviews.default.svc.cluster.local:9080", "reviews.default.svc.cluster.local"},
		{"outbound|9080|v2|reviews.default.svc.cluster.local", true, "reviews.default.svc.cluster.local:9080", "reviews.default.svc.cluster.local"},
		{"inbound|9080||", true, "", ""},
		{"outbound|x||reviews", true, "reviews", ""}, // not a port: the last field
		{"outbound|123456||reviews", true, "reviews", ""},
		{"PassthroughCluster", true, "PassthroughCluster", ""},
		{"ratings", true, "ratings", ""},
		{"reviews:9080", false, "reviews:9080", "reviews"},
		{"reviews", false, "reviews", ""},
		{"[::1]:80", false, "[::1]:80", "::1"},
		{"::1", false, "::1", ""},
		{"", false, "", ""},
	} {
		var scratch []byte
		first, second := RequestNames(c.key, c.fromCluster, &scratch)
		if first != c.first || second != c.second {
			t.Errorf("RequestNames(%q, cluster=%v) = %q, %q; want %q, %q", c.key, c.fromCluster, first, second, c.first, c.second)
		}
	}
}

func TestHostOf(t *testing.T) {
	for in, want := range map[string]string{
		"reviews:9080": "reviews", "reviews": "reviews", "[::1]:80": "::1", "::1": "::1", "a.b.c": "a.b.c",
	} {
		if got := HostOf(in); got != want {
			t.Errorf("HostOf(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestServiceForRequestAllocs: the lookup reuses the scratch buffer.
func TestServiceForRequestAllocs(t *testing.T) {
	top := &Topology{Services: []ServiceSpec{{Name: "details:9443", Endpoints: []EndpointSpec{{Address: "127.0.0.1:1"}}}}}
	tree, err := Build(top, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var scratch []byte
	n := testing.AllocsPerRun(100, func() {
		if _, ok := tree.ServiceForRequest("outbound|9443||details", true, &scratch); !ok {
			t.Fatal("not found")
		}
	})
	if n != 0 {
		t.Fatalf("%v allocations a lookup, want 0", n)
	}
}
