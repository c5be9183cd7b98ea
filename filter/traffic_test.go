package main

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/loctree/loctree/host"
)

// trafficConfig: the proxy is in r1/z1. Service api (weighted) has one
// endpoint in each of z1 (weight 1), z2 (3) and z3 of r2 (4): every
// request stays in z1. Service far has none in z1: requests go to its z2
// endpoint (same region), one of two equally weighted (random).
const trafficConfig = `{"locality":{"region":"r1","zone":"z1"},"topology":{"services":[
 {"name":"api.svc","hosts":["api"],"scopes":["region","zone"],"policy":"weighted","endpoints":[
  {"address":"127.0.5.1:80","locality":{"region":"r1","zone":"z1"},"weight":1},
  {"address":"127.0.5.2:80","locality":{"region":"r1","zone":"z2"},"weight":3},
  {"address":"127.0.5.3:80","locality":{"region":"r2","zone":"z3"},"weight":4}]},
 {"name":"far.svc","hosts":["far"],"scopes":["region","zone"],"endpoints":[
  {"address":"127.0.5.4:80","locality":{"region":"r1","zone":"z2"}},
  {"address":"127.0.5.5:80","locality":{"region":"r2","zone":"z3"}}]}]}}`

// trafficZone is trafficConfig's zone of each endpoint address.
var trafficZone = map[string]string{"127.0.5.1:80": "z1", "127.0.5.2:80": "z2", "127.0.5.3:80": "z3", "127.0.5.4:80": "z2", "127.0.5.5:80": "z3"}

func trafficMetric(src, dst string) string {
	return "loctree_traffic_source=.=" + src + ";.;loctree_traffic_destination=.=" + dst + ";.;loctree_traffic_requests_total"
}

// TestTrafficMatrixWasm: the real filter counts requests by (the proxy's
// zone, the picked endpoint's zone), as the picks' headers and the
// config's zones say; cross requests are those to another zone; the
// no-locality count is the sum, per request, of the share of its
// service's eligible weight outside z1 (api 7/8, far 2/2), carried across
// ticks: 1 api request is 0.875 (0 on the first tick), then 7 more and 4
// to far make 1·7/8 + 7·7/8 + 4·1 = 11.
func TestTrafficMatrixWasm(t *testing.T) {
	h, vm := startVM(t, trafficConfig)
	want := map[string]uint64{}
	ask := func(svc string) {
		ep := pickOn(t, vm, svc)
		want[trafficMetric("z1", trafficZone[ep])]++
	}
	ask("api")
	if err := vm.Tick(); err != nil {
		t.Fatal(err)
	}
	if got, _ := h.Metrics().Value("loctree_traffic_nolocality_cross_requests_total"); got != 0 {
		t.Errorf("no-locality crossings after one api request: %d, want 0 (0.875 carried)", got)
	}
	for range 7 {
		ask("api")
	}
	for range 4 {
		ask("far")
	}
	if err := vm.Tick(); err != nil {
		t.Fatal(err)
	}
	var cross uint64
	for name, n := range want {
		if !strings.HasSuffix(name, "=z1;.;loctree_traffic_requests_total") {
			cross += n
		}
	}
	want["loctree_traffic_placed_requests_total"] = 12
	want["loctree_traffic_cross_requests_total"] = cross
	want["loctree_traffic_nolocality_cross_requests_total"] = 11
	for name, n := range want {
		if got, ok := h.Metrics().Value(name); !ok || got != n {
			t.Errorf("%s = %d (defined %v), want %d", name, got, ok, n)
		}
	}
	if cross != 4 {
		t.Errorf("%d requests left z1, want far's 4", cross)
	}
}

// TestTrafficDestinationsCapped: a VM gives at most
// maxTrafficDestinations destination values their own counter; requests
// to later ones count as (other), none lost.
func TestTrafficDestinationsCapped(t *testing.T) {
	n := maxTrafficDestinations + 6
	var b strings.Builder
	b.WriteString(`{"locality":{"region":"r1","zone":"z1"},"topology":{"services":[`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"name":"svc-%d","hosts":["s%d"],"scopes":["region","zone"],"endpoints":[{"address":"127.0.6.%d:80","locality":{"region":"r1","zone":"zone-%d"}}]}`, i, i, i+1, i)
	}
	b.WriteString(`]}}`)
	h, vm := startVM(t, b.String())
	for i := range n {
		pickOn(t, vm, fmt.Sprintf("s%d", i))
	}
	if err := vm.Tick(); err != nil {
		t.Fatal(err)
	}
	var own int
	var total uint64
	for _, m := range snapshotOf(h) {
		if strings.HasSuffix(m.Name, "loctree_traffic_requests_total") {
			total += m.Value
			if !strings.Contains(m.Name, "=(other);") {
				own++
			}
		}
	}
	if own != maxTrafficDestinations || total != uint64(n) {
		t.Errorf("%d destinations with their own counter, %d requests; want %d and %d", own, total, maxTrafficDestinations, n)
	}
	if got, _ := h.Metrics().Value(trafficMetric("z1", "(other)")); got != 6 {
		t.Errorf("(other) counted %d, want 6", got)
	}
}

func snapshotOf(h *host.Host) []host.Metric { return h.Metrics().Snapshot() }

// TestTrafficScopeConfig: traffic_scope defaults to zone; a value Istio's
// tag regex could not carry, or with surrounding spaces, fails the
// configuration naming the field.
func TestTrafficScopeConfig(t *testing.T) {
	c, err := parseConfig([]byte(`{"topology":{"services":[]}}`))
	if err != nil || c.TrafficScope != "zone" {
		t.Fatalf("default traffic_scope %q (%v), want zone", c.TrafficScope, err)
	}
	for _, bad := range []string{"a;.;b", "a=.=b", " zone", "(other)"} {
		_, err := parseConfig([]byte(`{"topology":{"services":[]},"traffic_scope":` + strconv.Quote(bad) + `}`))
		if err == nil || !strings.Contains(err.Error(), "traffic_scope "+strconv.Quote(bad)) {
			t.Errorf("traffic_scope %q: %v, want an error naming it", bad, err)
		}
	}
}

// TestTrafficUntaggableSource: a proxy whose zone holds the tag delimiter
// counts its requests under the source "(other)", so Istio's tag regex
// still takes both tags out of the name.
func TestTrafficUntaggableSource(t *testing.T) {
	config := strings.Replace(trafficConfig, `"locality":{"region":"r1","zone":"z1"}`, `"locality":{"region":"r1","zone":"z;.;1"}`, 1)
	h, vm := startVM(t, config)
	pickOn(t, vm, "far")
	if err := vm.Tick(); err != nil {
		t.Fatal(err)
	}
	if got, ok := h.Metrics().Value(trafficMetric("(other)", "z2")); !ok || got != 1 {
		t.Errorf("%s = %d (defined %v), want 1; metrics %v", trafficMetric("(other)", "z2"), got, ok, h.Metrics().Snapshot())
	}
}
