package main

import (
	"context"
	"testing"

	"github.com/loctree/loctree/host"
	"github.com/loctree/loctree/internal/topology"
	"github.com/loctree/loctree/shared"
)

func casesTree(t testing.TB) *shared.Tree {
	t.Helper()
	top, err := topology.Parse([]byte(topo), "cases.json")
	if err != nil {
		t.Fatal(err)
	}
	tree, err := shared.Build(top, shared.BuildOptions{Generation: 1})
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

func TestResolveService(t *testing.T) {
	tree := casesTree(t)
	for _, c := range []struct {
		key         string
		fromCluster bool
		want        string // tree service name; "" none
	}{
		{"outbound|9443||details.default.svc.cluster.local", true, "details.default.svc.cluster.local:9443"},
		{"outbound|9080||details.default.svc.cluster.local", true, "details.default.svc.cluster.local"},
		{"outbound|9443|v2|details.default.svc.cluster.local", true, "details.default.svc.cluster.local:9443"},
		{"outbound|7000||details.default.svc.cluster.local", true, "details.default.svc.cluster.local"},
		{"outbound|9080||reviews.default.svc.cluster.local", true, "reviews.default.svc.cluster.local"},
		{"outbound|x||reviews.default.svc.cluster.local", true, "reviews.default.svc.cluster.local"}, // not an Istio name: its last field
		{"inbound|9080||", true, ""},
		{"ratings", true, "ratings"},
		{"outbound|9080||nope", true, ""},
		{"details:9443", false, "details.default.svc.cluster.local:9443"},
		{"details.default.svc.cluster.local:9443", false, "details.default.svc.cluster.local:9443"},
		{"details:9080", false, "details.default.svc.cluster.local"},
		{"details", false, "details.default.svc.cluster.local"},
		{"details:7000", false, "details.default.svc.cluster.local"},
		{"reviews:9080", false, "reviews.default.svc.cluster.local"},
		{"nope:80", false, ""},
		{"", false, ""},
	} {
		var scratch []byte
		got := ""
		if svc := resolveService(tree, c.key, c.fromCluster, &scratch); svc != nil {
			got = svc.Name()
		}
		if got != c.want {
			t.Errorf("resolveService(%q, cluster=%v) = %q, want %q", c.key, c.fromCluster, got, c.want)
		}
	}
}

// TestResolveServiceAllocs: building "HOST:PORT" reuses the scratch buffer.
func TestResolveServiceAllocs(t *testing.T) {
	tree := casesTree(t)
	var scratch []byte
	n := testing.AllocsPerRun(100, func() {
		if resolveService(tree, "outbound|9443||details.default.svc.cluster.local", true, &scratch) == nil {
			t.Fatal("not found")
		}
		if resolveService(tree, "details:7000", false, &scratch) == nil {
			t.Fatal("not found")
		}
	})
	if n != 0 {
		t.Fatalf("%v allocations a lookup pair, want 0", n)
	}
}

// TestServiceCacheWasm: one VM of the real .wasm serves requests for both
// ports of a service, a service it does not know and the ports again, by
// cluster name and by authority; the cached lookup never answers for the
// wrong key.
func TestServiceCacheWasm(t *testing.T) {
	ctx := context.Background()
	h := newHost(t, inline(`,"locality":{"region":"us-west"}`), host.Options{})
	vm, err := h.NewVM(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer vm.Close()
	const fqdn = "details.default.svc.cluster.local"
	for i, c := range []struct {
		cluster, authority, want string // want "": header absent
	}{
		{"outbound|9080||" + fqdn, "details:9080", "127.0.4.2:9080"},
		{"outbound|9443||" + fqdn, "details:9443", "127.0.4.2:9443"},
		{"outbound|9443||" + fqdn, "details:9443", "127.0.4.2:9443"},
		{"outbound|9080||" + fqdn, "details:9080", "127.0.4.2:9080"},
		{"outbound|9080||nope", "nope:9080", ""},
		{"outbound|9080||nope", "nope:9080", ""},
		{"", "details:9443", "127.0.4.2:9443"},
		{"", "details", "127.0.4.2:9080"},
		{"", "details:9443", "127.0.4.2:9443"},
		{"outbound|9443||" + fqdn, "details:9443", "127.0.4.2:9443"},
		{"details:9443", "x", "127.0.4.2:9443"}, // a plain cluster name taken whole
	} {
		props := host.NewProperties()
		if c.cluster != "" {
			props.SetString([]string{"xds", "cluster_name"}, c.cluster)
		}
		res, err := vm.Do(ctx, &host.Request{Headers: host.Headers(req(c.authority)), Properties: props}, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := res.Request.Headers.Get(defaultHeader)
		if got != c.want {
			t.Errorf("request %d (cluster %q, authority %q): header %q, want %q", i, c.cluster, c.authority, got, c.want)
		}
	}
}
