package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// networkPickDoc is shared's issue26NetworkTopology (a spillover service
// with network first and failover r1 → r2, issue 26 items 3 and 4).
const networkPickDoc = `services:
  - name: net
    scopes: [network, region, zone, subzone]
    spillover: {}
    failover: [{from: r1, to: r2}]
    endpoints:
      - {address: 127.0.36.1:80, locality: {network: n1, region: r1, zone: z1, subzone: s1}, healthy: false}
      - {address: 127.0.36.2:80, locality: {network: n1, region: r3, zone: z1, subzone: s1}, healthy: false}
      - {address: 127.0.36.3:80, locality: {network: n2, region: r1, zone: z1, subzone: s1}}
      - {address: 127.0.36.4:80, locality: {network: n2, region: r1, zone: z1, subzone: s1}, healthy: false}
      - {address: 127.0.36.5:80, locality: {network: n2, region: r1, zone: z2, subzone: s1}}
      - {address: 127.0.36.6:80, locality: {network: n3, region: r1, zone: z2, subzone: s1}, healthy: false}
      - {address: 127.0.36.7:80, locality: {network: n2, region: r1, zone: z3, subzone: s1}}
      - {address: 127.0.36.8:80, locality: {network: n3, region: r1, zone: z1, subzone: s1}, healthy: false}
`

// TestPickNetworkPriorities: tree pick -o json reports the priorities of
// the other networks as such (other_networks, matched counting the scopes
// after network) and their locality level across those networks ("*" for
// the network), with the shares worked by hand in shared's
// issue26NetworkTopology from Istio's priorities at b6787c12 and Envoy's
// effectiveLocalityWeight: P2 (r1/z1/s1 elsewhere) 46 %; P3 (r1, other
// zones) 54 %, r1/z2/s1 (n2's healthy .5 with n3's unhealthy .6: 1.4)
// 58.33 % of it, r1/z3/s1 (1) 41.67 %. The table says "other networks".
func TestPickNetworkPriorities(t *testing.T) {
	top := filepath.Join(t.TempDir(), "net.yaml")
	if err := os.WriteFile(top, []byte(networkPickDoc), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"tree", "pick", "-f", top, "--service", "net", "--from", "network=n1,region=r1,zone=z1,subzone=s1", "--count", "1000", "--seed", "1"}
	code, out, errs := runCLI(t, append(args, "-o", "json")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var res struct {
		Loads []struct {
			Matched     int  `json:"matched"`
			Other       bool `json:"other_networks"`
			HealthyLoad int  `json:"healthy_load"`
			Localities  []struct {
				Locality     string  `json:"locality"`
				HealthyShare float64 `json:"healthy_share"`
			} `json:"localities"`
		} `json:"loads"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Loads) != 4 || res.Loads[1].Other || !res.Loads[2].Other || !res.Loads[3].Other ||
		res.Loads[2].Matched != 3 || res.Loads[3].Matched != 1 || res.Loads[2].HealthyLoad != 46 || res.Loads[3].HealthyLoad != 54 {
		t.Fatalf("priorities:\n%s", out)
	}
	got := map[string]float64{}
	for _, l := range res.Loads[3].Localities {
		got[l.Locality] = l.HealthyShare
	}
	if len(got) != 2 || got["*/r1/z2/s1"] != 58.33 || got["*/r1/z3/s1"] != 41.67 {
		t.Fatalf("P3 localities %v, want */r1/z2/s1 58.33 and */r1/z3/s1 41.67:\n%s", got, out)
	}
	if code, out, errs = runCLI(t, args...); code != 0 || !strings.Contains(out, "P3  other networks, matched 1 of the 3 after network") {
		t.Fatalf("table (exit %d, %s):\n%s", code, errs, out)
	}
}
