package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/loctree/loctree/host"
)

// servicesTopology is a plugin config with n services svc-0 … svc-(n-1)
// (hosts s0 …), one endpoint each in the proxy's own zone, and strict
// service "far" whose only endpoint is in another region.
func servicesTopology(n int) string {
	var b strings.Builder
	b.WriteString(`{"topology":{"services":[`)
	for i := range n {
		fmt.Fprintf(&b, `{"name":"svc-%d","hosts":["s%d"],"scopes":["region","zone"],"endpoints":[{"address":"127.0.3.%d:80","locality":{"region":"r1","zone":"z1"}}]},`, i, i, i%250+1)
	}
	b.WriteString(`{"name":"far.svc","hosts":["far"],"mode":"strict","scopes":["region"],"endpoints":[{"address":"127.0.4.1:80","locality":{"region":"r2"}}]}`)
	b.WriteString(`]},"locality":{"region":"r1","zone":"z1"}}`)
	return b.String()
}

// picksMetric and noCandidateMetric are the names the filter defines, in
// the form Istio's extraStatTags extract (tools/packaging/common/
// envoy_bootstrap.json:121-126 in istio/istio: `(<tag>=\.=(.*?);\.;)`).
func picksMetric(service string, level int) string {
	return fmt.Sprintf("loctree_service=.=%s;.;loctree_level=.=%d;.;loctree_service_picks_total", service, level)
}

func noCandidateMetric(service string) string {
	return "loctree_service=.=" + service + ";.;loctree_service_no_candidate_total"
}

func startVM(t *testing.T, config string) (*host.Host, *host.VM) {
	t.Helper()
	h := newHost(t, config, host.Options{ManualTicks: true})
	vm, err := h.NewVM(context.Background())
	if err != nil {
		t.Fatalf("start: %v (logs %v)", err, h.Logs())
	}
	t.Cleanup(func() { vm.Close() })
	return h, vm
}

// TestPicksPerService: picks are counted per service and matched level
// (both scopes matched: level 2), defined on first use, so a service
// nobody asked for has no metric; a strict service with no candidate
// counts its own no-candidate counter. Counts reach the host on the tick.
func TestPicksPerService(t *testing.T) {
	h, vm := startVM(t, servicesTopology(3))
	for _, s := range []string{"s0", "s0", "s1", "far"} {
		pickOn(t, vm, s)
	}
	if err := vm.Tick(); err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{picksMetric("svc-0", 2): 2, picksMetric("svc-1", 2): 1, noCandidateMetric("far.svc"): 1}
	for name, n := range want {
		if got, ok := h.Metrics().Value(name); !ok || got != n {
			t.Errorf("%s = %d (defined %v), want %d", name, got, ok, n)
		}
	}
	for _, m := range h.Metrics().Snapshot() {
		if strings.Contains(m.Name, "svc-2") {
			t.Errorf("%s defined, but svc-2 had no request", m.Name)
		}
	}
}

// TestServiceMetricsCapped: past maxServiceMetrics services with their own
// counters, picks are counted under the service label "(other)": the
// number of metrics a VM defines stays bounded however many services the
// tree holds, and no pick is lost.
func TestServiceMetricsCapped(t *testing.T) {
	n := maxServiceMetrics + 5
	h, vm := startVM(t, servicesTopology(n))
	for i := range n {
		pickOn(t, vm, fmt.Sprintf("s%d", i))
	}
	if err := vm.Tick(); err != nil {
		t.Fatal(err)
	}
	var own int
	var total uint64
	for _, m := range h.Metrics().Snapshot() {
		if strings.HasSuffix(m.Name, "loctree_service_picks_total") {
			total += m.Value
			if !strings.Contains(m.Name, "=(other);") {
				own++
			}
		}
	}
	if own != maxServiceMetrics || total != uint64(n) {
		t.Errorf("%d services with their own picks counter, %d picks; want %d and %d", own, total, maxServiceMetrics, n)
	}
	if got, _ := h.Metrics().Value(picksMetric("(other)", 2)); got != 5 {
		t.Errorf("(other) counted %d picks, want 5", got)
	}
}

// TestUntaggableServiceCountsAsOther: a service whose name holds the tag
// delimiter ";.;" (Istio's regex would cut its value short) counts under
// "(other)", as does a service literally named "(other)".
func TestUntaggableServiceCountsAsOther(t *testing.T) {
	config := `{"locality":{"region":"r1"},"topology":{"services":[
 {"name":"a;.;b","hosts":["ab"],"scopes":["region"],"endpoints":[{"address":"127.0.3.1:80","locality":{"region":"r1"}}]},
 {"name":"(other)","hosts":["o"],"scopes":["region"],"endpoints":[{"address":"127.0.3.2:80","locality":{"region":"r1"}}]}]}}`
	h, vm := startVM(t, config)
	pickOn(t, vm, "ab")
	pickOn(t, vm, "o")
	if err := vm.Tick(); err != nil {
		t.Fatal(err)
	}
	if got, _ := h.Metrics().Value(picksMetric("(other)", 1)); got != 2 {
		t.Errorf("(other) counted %d picks, want 2 (metrics %v)", got, h.Metrics().Snapshot())
	}
}
