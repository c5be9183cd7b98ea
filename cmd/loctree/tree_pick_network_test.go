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
	res, out, args := pickNet(t, networkPickDoc, "network=n1,region=r1,zone=z1,subzone=s1")
	if len(res.Loads) != 4 || res.Loads[1].Other || !res.Loads[2].Other || !res.Loads[3].Other ||
		res.Loads[2].Matched != 3 || res.Loads[3].Matched != 1 || res.Loads[2].HealthyLoad != 46 || res.Loads[3].HealthyLoad != 54 {
		t.Fatalf("priorities:\n%s", out)
	}
	got := res.shares(3)
	if len(got) != 2 || got["*/r1/z2/s1"] != 58.33 || got["*/r1/z3/s1"] != 41.67 {
		t.Fatalf("P3 localities %v, want */r1/z2/s1 58.33 and */r1/z3/s1 41.67:\n%s", got, out)
	}
	if code, out, errs := runCLI(t, args...); code != 0 || !strings.Contains(out, "P3  other networks, matched 1 of the 3 after network") {
		t.Fatalf("table (exit %d, %s):\n%s", code, errs, out)
	}
}

// TestPickClusterPriorities: networkPickDoc's service with cluster for
// network and no failover rule (issue 26: a scope before region other than
// a leading network). Istio's failoverPriority [cluster, region, zone,
// subzone] puts every other cluster in one priority (len − 0 at b6787c12),
// so tree pick -o json reports it as one (other_values "cluster",
// one_rank) and its localities across the clusters, worked by hand from
// Envoy's effectiveLocalityWeight: r1/z1/s1 (.3 healthy of .3, .4, .8)
// 3·min(1, 1.4·1/3) = 1.4, r1/z2/s1 (.5 of .5, .6) 1.4, r1/z3/s1 (.7) 1:
// 36.84 %, 36.84 %, 26.32 %. A locality per cluster (without the copies by
// the first scope) splits r1/z1/s1 into c2's (1.4) and c3's (0).
func TestPickClusterPriorities(t *testing.T) {
	doc := strings.ReplaceAll(networkPickDoc, "network: n", "cluster: c")
	doc = strings.Replace(doc, "scopes: [network,", "scopes: [cluster,", 1)
	doc = strings.Replace(doc, "    failover: [{from: r1, to: r2}]\n", "", 1)
	res, out, args := pickNet(t, doc, "cluster=c1,region=r1,zone=z1,subzone=s1")
	if len(res.Loads) != 3 || res.Loads[1].OtherValues != "" || res.Loads[2].OtherValues != "cluster" || !res.Loads[2].OneRank || res.Loads[2].Other || res.Loads[2].HealthyLoad != 100 {
		t.Fatalf("priorities:\n%s", out)
	}
	got := res.shares(2)
	if len(got) != 3 || got["*/r1/z1/s1"] != 36.84 || got["*/r1/z2/s1"] != 36.84 || got["*/r1/z3/s1"] != 26.32 {
		t.Fatalf("P2 localities %v, want */r1/z1/s1 and */r1/z2/s1 36.84, */r1/z3/s1 26.32:\n%s", got, out)
	}
	if code, out, errs := runCLI(t, args...); code != 0 || !strings.Contains(out, "P2  other cluster values, one priority") {
		t.Fatalf("table (exit %d, %s):\n%s", code, errs, out)
	}
}

// pickPriorities is what these tests read of tree pick -o json.
type pickPriorities struct {
	Loads []struct {
		Matched     int    `json:"matched"`
		Other       bool   `json:"other_networks"`
		OtherValues string `json:"other_values"`
		OneRank     bool   `json:"one_rank"`
		HealthyLoad int    `json:"healthy_load"`
		Localities  []struct {
			Locality     string  `json:"locality"`
			HealthyShare float64 `json:"healthy_share"`
		} `json:"localities"`
	} `json:"loads"`
}

// shares are priority p's localities' healthy shares by locality.
func (r *pickPriorities) shares(p int) map[string]float64 {
	got := map[string]float64{}
	for _, l := range r.Loads[p].Localities {
		got[l.Locality] = l.HealthyShare
	}
	return got
}

// pickNet runs tree pick of service net in doc from source, 1,000 picks,
// and returns its -o json answer, the answer itself, and the arguments
// without -o (for the table).
func pickNet(t *testing.T, doc, from string) (*pickPriorities, string, []string) {
	t.Helper()
	top := filepath.Join(t.TempDir(), "net.yaml")
	if err := os.WriteFile(top, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"tree", "pick", "-f", top, "--service", "net", "--from", from, "--count", "1000", "--seed", "1"}
	code, out, errs := runCLI(t, append(args, "-o", "json")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var res pickPriorities
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	return &res, out, args
}

// TestPickClassPriorities: Istio's "FailoverPriority with Failover"
// (pilot/pkg/networking/core/loadbalancer/loadbalancer_test.go at
// b6787c126ec0, lines 1024-1150: failoverPriority [network, cluster],
// failover region1 → region2, a proxy n2/c2 in region1/zone1/subzone1;
// Istio's priorities 2.2.2.2 0, 5.5.5.5 1, 4.4.4.4 2, 1.1.1.1 3, 3.3.3.3
// 4, 6.6.6.6 5), as loctree's scopes [network, cluster, region, zone,
// subzone]: tree pick -o json lists the six priorities in that order and
// says which class each is (other_values: the scope its endpoints first
// differ at; other_networks; matched: the scopes they share).
func TestPickClassPriorities(t *testing.T) {
	doc := `services:
  - name: net
    scopes: [network, cluster, region, zone, subzone]
    spillover: {}
    failover: [{from: region1, to: region2}]
    endpoints:
      - {address: 127.0.37.1:80, locality: {network: n1, cluster: c1, region: region1, zone: zone1, subzone: subzone1}}
      - {address: 127.0.37.2:80, locality: {network: n2, cluster: c2, region: region1, zone: zone2, subzone: subzone2}}
      - {address: 127.0.37.3:80, locality: {network: n1, cluster: c3, region: region2, zone: zone2, subzone: subzone2}}
      - {address: 127.0.37.4:80, locality: {network: n2, cluster: c4, region: region3, zone: zone3, subzone: subzone3}}
      - {address: 127.0.37.5:80, locality: {network: n2, cluster: c2, region: region2, zone: zone2, subzone: subzone2}}
      - {address: 127.0.37.6:80, locality: {network: n1, cluster: c6, region: region3, zone: zone3, subzone: subzone3}}
`
	res, out, _ := pickNet(t, doc, "network=n2,cluster=c2,region=region1,zone=zone1,subzone=subzone1")
	type want struct {
		other   string
		nets    bool
		matched int
	}
	// 2.2.2.2: n2/c2 and region1; 5.5.5.5: n2/c2, region2 (the rule's
	// to); 4.4.4.4: n2, another cluster, region3; 1.1.1.1: another
	// network and cluster, region1/zone1/subzone1; 3.3.3.3: region2;
	// 6.6.6.6: region3.
	wants := []want{{"", false, 3}, {"", false, 2}, {"cluster", false, 1}, {"cluster", true, 3}, {"cluster", true, 0}, {"cluster", true, 0}}
	if len(res.Loads) != len(wants) || res.Loads[0].HealthyLoad != 100 {
		t.Fatalf("priorities:\n%s", out)
	}
	for p, w := range wants {
		if l := res.Loads[p]; l.OtherValues != w.other || l.Other != w.nets || l.Matched != w.matched || l.OneRank {
			t.Fatalf("P%d: %+v, want %+v:\n%s", p, l, w, out)
		}
	}
}

// TestInspectClassesAndPlainNetwork: tree inspect -o json names the scopes
// before the locality whose classes have copies, and says network_rule
// ztunnel only for a service that applies it: network first under
// network_rule plain with spillover has copies by its first scope ranked
// by the locality scopes (Istio before b6787c12), not the rule (it said
// "ztunnel" for both, and the table "network rule: ztunnel").
func TestInspectClassesAndPlainNetwork(t *testing.T) {
	dir := t.TempDir()
	classes := strings.Replace(networkPickDoc, "scopes: [network, region, zone, subzone]", "scopes: [network, cluster, region, zone, subzone]", 1)
	plain := strings.Replace(networkPickDoc, "    spillover: {}\n", "    spillover: {}\n    network_rule: plain\n", 1)
	for _, c := range []struct {
		doc, rule, classes, table string
	}{
		{networkPickDoc, "ztunnel", "", "network rule: ztunnel"},
		{classes, "ztunnel", "network cluster", "classes before the locality"},
		{plain, "", "", "other network values"},
	} {
		path := filepath.Join(dir, "t.yaml")
		if err := os.WriteFile(path, []byte(c.doc), 0o644); err != nil {
			t.Fatal(err)
		}
		code, out, errs := runCLI(t, "tree", "inspect", "-f", path, "-o", "json")
		var res struct {
			Services []struct {
				NetworkRule string   `json:"network_rule"`
				Classes     []string `json:"classes_before_locality"`
			} `json:"services"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &res) != nil || len(res.Services) != 1 {
			t.Fatalf("tree inspect -o json (exit %d, %s):\n%s", code, errs, out)
		}
		if s := res.Services[0]; s.NetworkRule != c.rule || strings.Join(s.Classes, " ") != c.classes {
			t.Errorf("network_rule %q, classes %v; want %q, %q", s.NetworkRule, s.Classes, c.rule, c.classes)
		}
		if code, out, _ := runCLI(t, "tree", "inspect", "-f", path); code != 0 || !strings.Contains(out, c.table) {
			t.Errorf("table without %q:\n%s", c.table, out)
		}
	}
}
