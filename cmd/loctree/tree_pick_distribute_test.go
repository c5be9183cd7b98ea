package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// distLocalityPickDoc is issue 26 item 5's example (shared's
// distLocalityCase): a rule from r1 to r1/z1 70, r2 30; r1/z1 holds two
// localities, s1 (.1 healthy, .2 unhealthy) and s2 (.3, weight 4).
const distLocalityPickDoc = `services:
  - name: distloc
    spillover: {}
    distribute: [{from: r1, to: {r1/z1: 70, r2: 30}}]
    endpoints:
      - {address: 127.0.55.1:80, locality: {region: r1, zone: z1, subzone: s1}}
      - {address: 127.0.55.2:80, locality: {region: r1, zone: z1, subzone: s1}, healthy: false}
      - {address: 127.0.55.3:80, locality: {region: r1, zone: z1, subzone: s2}, weight: 4}
      - {address: 127.0.55.4:80, locality: {region: r2, zone: z1, subzone: s1}}
      - {address: 127.0.55.5:80, locality: {region: r3, zone: z1, subzone: s1}}
`

// TestPickDistributeLocalities: tree pick -o json reports a distribute
// rule's split per locality, as Istio's applyLocalityWeights weighs each
// locality (ceil(weight · W_L / ΣW): s1 ceil(2·70/6) = 24, s2 ceil(4·70/6)
// = 47, r2 30; istio/istio loadbalancer.go at 86c9f01fd735) and Envoy's
// effectiveLocalityWeight scales it by its own health (s1 24 · min(1, 1.4 ·
// 1/2) = 16.8; locality_wrr.cc at e8e02bb2): of 93.8, s1 17.91 %, s2
// 50.11 %, r2 31.98 % of the traffic, worked by hand.
func TestPickDistributeLocalities(t *testing.T) {
	top := filepath.Join(t.TempDir(), "distloc.yaml")
	if err := os.WriteFile(top, []byte(distLocalityPickDoc), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "tree", "pick", "-f", top, "--service", "distloc", "--from", "region=r1,zone=z1,subzone=s1",
		"--count", "10000", "--seed", "1", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var res pickLocalities
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Loads) != 1 {
		t.Fatalf("loads %+v, want the one priority", res.Loads)
	}
	want := map[string][3]float64{"r1/z1/s1": {17.91, 0, 17.91}, "r1/z1/s2": {50.11, 0, 50.11}, "r2/z1/s1": {31.98, 0, 31.98}}
	got := res.shares(0)
	if len(got) != len(want) || got["r1/z1/s1"] != want["r1/z1/s1"] || got["r1/z1/s2"] != want["r1/z1/s2"] || got["r2/z1/s1"] != want["r2/z1/s1"] {
		t.Fatalf("localities %v, want %v:\n%s", got, want, out)
	}
	if n := res.Picks["127.0.55.1:80"]; n < 1600 || n > 2000 {
		t.Fatalf("picks %v: want about 17.9 %% on 127.0.55.1:80 (r1/z1/s1)", res.Picks)
	}
}
