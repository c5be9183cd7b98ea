package main

import (
	"testing"

	"github.com/loctree/loctree/shared"
)

// TestRequestNamesAgreeWithFilter: what `wasm run` explains about the
// service a request names agrees with what the filter looks up
// (shared.Tree.ServiceForRequest), for Envoy's cluster-name forms and
// authorities. The two once differed: the explanation took a cluster name
// that is not Istio's whole, and a non-decimal port as a port.
func TestRequestNamesAgreeWithFilter(t *testing.T) {
	ep := []shared.EndpointSpec{{Address: "127.0.0.1:1"}}
	tree, err := shared.Build(&shared.Topology{Services: []shared.ServiceSpec{
		{Name: "details:9443", Endpoints: ep}, {Name: "details", Endpoints: ep}, {Name: "reviews", Endpoints: ep},
	}}, shared.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ cluster, authority string }{
		{"outbound|9443||details", ""}, {"outbound|9080|v1|details", ""}, {"outbound|x||reviews", ""},
		{"outbound|99999999||details", ""}, {"outbound|reviews", ""}, {"inbound|9080||", ""}, {"reviews", ""}, {"PassthroughCluster", ""},
		{"", "details:9443"}, {"", "details:80"}, {"", "reviews"}, {"", "nope:80"}, {"", "[::1]:80"},
	} {
		key, fromCluster := c.authority, false
		if c.cluster != "" {
			key, fromCluster = c.cluster, true
		}
		var scratch []byte
		_, found := tree.ServiceForRequest(key, fromCluster, &scratch)
		if explained := unknownService(tree, c.cluster, c.authority) == ""; explained != found {
			t.Errorf("cluster %q authority %q: the filter finds a service: %v; wasm run says so: %v", c.cluster, c.authority, found, explained)
		}
	}
}
