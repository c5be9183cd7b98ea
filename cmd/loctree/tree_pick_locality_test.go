package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// localityPickDoc is issue 26 item 2's example (failover r1→r2, so istiod
// turns Envoy's locality weighted LB on: istio/istio pilot/pkg/networking/
// core/loadbalancer/loadbalancer.go ApplyToCluster at 86c9f01fd735), with
// zone z2 added: s1 one degraded endpoint (.8), s2 one healthy (.9).
const localityPickDoc = `services:
  - name: loc
    spillover: {}
    failover: [{from: r1, to: r2}]
    endpoints:
      - {address: 127.0.26.1:80, locality: {region: r1, zone: z1, subzone: s1}, healthy: false}
      - {address: 127.0.26.2:80, locality: {region: r1, zone: z1, subzone: s2}}
      - {address: 127.0.26.3:80, locality: {region: r1, zone: z1, subzone: s3}}
      - {address: 127.0.26.4:80, locality: {region: r1, zone: z1, subzone: s3}}
      - {address: 127.0.26.5:80, locality: {region: r1, zone: z1, subzone: s3}}
      - {address: 127.0.26.6:80, locality: {region: r1, zone: z1, subzone: s3}, healthy: false}
      - {address: 127.0.26.7:80, locality: {region: r2, zone: z1, subzone: s1}}
      - {address: 127.0.26.8:80, locality: {region: r1, zone: z2, subzone: s1}, degraded: true}
      - {address: 127.0.26.9:80, locality: {region: r1, zone: z2, subzone: s2}}
`

type pickLocalities struct {
	Loads []struct {
		Priority   int `json:"priority"`
		Localities []struct {
			Locality      string   `json:"locality"`
			Healthy       int      `json:"healthy"`
			Degraded      int      `json:"degraded"`
			HealthyShare  float64  `json:"healthy_share"`
			DegradedShare float64  `json:"degraded_share"`
			Share         float64  `json:"share"`
			Endpoints     []string `json:"endpoints"`
		} `json:"localities"`
	} `json:"loads"`
	Picks map[string]int `json:"picks"`
}

// localityShares is "locality: healthy share/degraded share/traffic share"
// per locality of priority p.
func (r *pickLocalities) shares(p int) map[string][3]float64 {
	out := map[string][3]float64{}
	for _, l := range r.Loads[p].Localities {
		out[l.Locality] = [3]float64{l.HealthyShare, l.DegradedShare, l.Share}
	}
	return out
}

// TestPickLocalityShares: tree pick reports the locality level inside a
// priority — which locality gets which share of the priority's healthy and
// degraded load and of the traffic — in -o json, -o yaml and the table.
// The shares are worked by hand from Envoy's effectiveLocalityWeight,
// weight · min(1, 1.4 · eligible/hosts) (envoyproxy/envoy
// source/common/upstream/locality_wrr.cc at e8e02bb2f613), the weight the
// sum of the locality's endpoint weights (istio/istio pilot/pkg/xds/
// endpoints/endpoint_builder.go at 86c9f01fd735):
//
//   - from r1/z1/s1: P0 (s1) has no healthy endpoint; P1 (z1 without s1)
//     takes all the load: s2 1 · min(1, 1.4) = 1, s3 4 · min(1, 1.4·3/4) =
//     4: 20 % and 80 %.
//   - from r1/z3: P0 is r1 (8 endpoints, 5 healthy, 1 degraded): healthy
//     load 140·5/8 = 87 (P1, r2, the other 13); healthy weights z1/s1 0, z1/s2
//     1, z1/s3 4, z2/s1 0 (no healthy host), z2/s2 1: 1/6, 4/6, 1/6 of 87 %;
//     the degraded load (0 %) all to z2/s1, the only degraded locality
//     (1 · min(1, 1.4·1/1) = 1), named from the topology.
//
// A service where istiod leaves locality weighting off (default scopes, no
// failover rule) shows no locality level.
func TestPickLocalityShares(t *testing.T) {
	top := filepath.Join(t.TempDir(), "loc.yaml")
	if err := os.WriteFile(top, []byte(localityPickDoc), 0o644); err != nil {
		t.Fatal(err)
	}
	pick := func(from, format string) string {
		t.Helper()
		code, out, errs := runCLI(t, "tree", "pick", "-f", top, "--service", "loc", "--from", from, "--count", "10000", "--seed", "1", "-o", format)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		return out
	}
	var res pickLocalities
	if err := json.Unmarshal([]byte(pick("region=r1,zone=z1,subzone=s1", "json")), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Loads) != 4 || len(res.Loads[1].Localities) != 2 {
		t.Fatalf("loads %+v, want 4 priorities, P1 with localities s2 and s3", res.Loads)
	}
	got := res.shares(1)
	if got["r1/z1/s2"] != [3]float64{20, 0, 20} || got["r1/z1/s3"] != [3]float64{80, 0, 80} {
		t.Fatalf("P1 localities %v, want r1/z1/s2 20 %% and r1/z1/s3 80 %% of the traffic", got)
	}
	if l := res.Loads[1].Localities[1]; strings.Join(l.Endpoints, ",") != "127.0.26.3:80,127.0.26.4:80,127.0.26.5:80" || l.Healthy != 3 {
		t.Fatalf("r1/z1/s3: %+v, want its three healthy endpoints", l)
	}
	if n := res.Picks["127.0.26.2:80"]; n < 1800 || n > 2200 {
		t.Fatalf("picks %v: want about 20 %% on 127.0.26.2:80 (s2)", res.Picks)
	}

	var y pickLocalities
	if err := yaml.Unmarshal([]byte(pick("region=r1,zone=z3", "yaml")), &y); err != nil {
		t.Fatal(err)
	}
	if len(y.Loads) != 2 {
		t.Fatalf("loads %+v, want 2 priorities", y.Loads)
	}
	want := map[string][3]float64{"r1/z1/s2": {16.67, 0, 14.5}, "r1/z1/s3": {66.67, 0, 58}, "r1/z2/s2": {16.67, 0, 14.5}, "r1/z2/s1": {0, 100, 0}}
	if got := y.shares(0); len(got) != len(want) || got["r1/z1/s2"] != want["r1/z1/s2"] || got["r1/z1/s3"] != want["r1/z1/s3"] ||
		got["r1/z2/s2"] != want["r1/z2/s2"] || got["r1/z2/s1"] != want["r1/z2/s1"] {
		t.Fatalf("yaml: P0 localities %v, want %v", got, want)
	}

	table := pick("region=r1,zone=z1,subzone=s1", "table")
	for _, line := range []string{"localities (Envoy's locality weighted LB)", "r1/z1/s2", "20.00% of the traffic", "80.00% of the traffic"} {
		if !strings.Contains(table, line) {
			t.Fatalf("table lacks %q:\n%s", line, table)
		}
	}

	off := strings.Replace(localityPickDoc, "    failover: [{from: r1, to: r2}]\n", "", 1)
	if err := os.WriteFile(top, []byte(off), 0o644); err != nil {
		t.Fatal(err)
	}
	var none pickLocalities
	if err := json.Unmarshal([]byte(pick("region=r1,zone=z1,subzone=s1", "json")), &none); err != nil {
		t.Fatal(err)
	}
	for _, l := range none.Loads {
		if len(l.Localities) > 0 {
			t.Fatalf("without a failover rule (istiod: no locality weighted LB) P%d shows localities %+v", l.Priority, l.Localities)
		}
	}
}
