package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// policyTopology has every policy inspect shows: spillover with its
// settings, failover rules and a failover limit, failoverPriority scopes,
// distribute, a consistent_hash service's default session affinity, a
// load-aware band, and
// endpoints healthy, degraded and unhealthy (under only_healthy and
// allow_all).
const policyTopology = `services:
  - name: api
    spillover: {overprovisioning_factor: 150, panic_threshold: 30}
    failover: [{from: us-east, to: ap-south}]
    failover_limit: region
    endpoints:
      - {address: "127.0.0.1:80", locality: {region: us-east, zone: a, subzone: s}}
      - {address: "127.0.0.2:80", locality: {region: ap-south, zone: b, subzone: s}, degraded: true}
      - {address: "127.0.0.3:80", locality: {region: ap-south, zone: b, subzone: s}, healthy: false}
  - name: prio
    scopes: [network, region]
    spillover: {}
    health: allow_all
    endpoints:
      - {address: "127.0.0.4:80", locality: {network: n1, region: us-east}}
      - {address: "127.0.0.5:80", locality: {network: n1, region: us-east}, degraded: true}
      - {address: "127.0.0.6:80", locality: {network: n2, region: us-east}, healthy: false}
  - name: spread
    spillover: {}
    distribute: [{from: "us-east/*", to: {"us-east/*": 70, "ap-south/*": 30}}]
    endpoints:
      - {address: "127.0.0.7:80", locality: {region: us-east, zone: a, subzone: s}}
      - {address: "127.0.0.8:80", locality: {region: ap-south, zone: b, subzone: s}}
  - name: sticky
    policy: consistent_hash
    endpoints:
      - {address: "127.0.0.9:80"}
  - name: wide
    load_aware: {high: 3, low: 1}
    endpoints:
      - {address: "127.0.0.10:80", locality: {region: us-east, zone: a}}
`

func writePolicyTopology(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(policyTopology), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// Issue 26 item 7: tree inspect showed none of spillover, failover,
// failoverPriority, failover_limit or a default session affinity, and
// listed a degraded endpoint as "(unhealthy)". The text names them all and
// each endpoint's state as it is.
func TestInspectShowsPolicy(t *testing.T) {
	code, out, errs := runCLI(t, "tree", "inspect", "-f", writePolicyTopology(t))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{
		"spillover: overprovisioning factor 150% (1.5), panic threshold 30%",
		"failover: us-east -> ap-south",
		"failover limit: region (candidates share the source's region)",
		"failover priority: network, region (Istio failoverPriority)",
		"distribute from us-east/*: ap-south/* 30%, us-east/* 70%",
		"session affinity 10800 s (default)",
		"load aware: widen above 3, narrow below 1 per eligible endpoint: requests in flight (the filter, each proxy worker's own count), open connections (the kernel, each node's own count)",
		"not eligible: 127.0.0.2:80 (degraded) 127.0.0.3:80 (unhealthy)",
		"127.0.0.4:80 127.0.0.5:80 (degraded)",
		"127.0.0.6:80 (unhealthy)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// The same in -o json and -o yaml, with snake_case keys.
func TestInspectPolicyData(t *testing.T) {
	path := writePolicyTopology(t)
	for _, format := range []string{"json", "yaml"} {
		code, out, errs := runCLI(t, "tree", "inspect", "-f", path, "-o", format)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", format, code, errs)
		}
		var got struct {
			Services []map[string]any `json:"services"`
		}
		err := json.Unmarshal([]byte(out), &got)
		if format == "yaml" {
			err = yaml.Unmarshal([]byte(out), &got)
		}
		if err != nil || len(got.Services) != 5 {
			t.Fatalf("%s: %v:\n%s", format, err, out)
		}
		api, prio, spread, sticky, wide := got.Services[0], got.Services[1], got.Services[2], got.Services[3], got.Services[4]
		checks := []struct {
			what      string
			got, want any
		}{
			{"api spillover", api["spillover"], map[string]any{"overprovisioning_factor": 150.0, "panic_threshold": 30.0}},
			{"api failover", api["failover"], []any{map[string]any{"from": "us-east", "to": "ap-south"}}},
			{"api failover_limit", api["failover_limit"], "region"},
			{"api endpoint_states", api["endpoint_states"], map[string]any{"127.0.0.1:80": "healthy", "127.0.0.2:80": "degraded", "127.0.0.3:80": "unhealthy"}},
			{"api ineligible_reasons", api["ineligible_reasons"], map[string]any{"127.0.0.2:80": "degraded", "127.0.0.3:80": "unhealthy"}},
			{"prio failover_priority", prio["failover_priority"], []any{"network", "region"}},
			{"prio endpoint_states", prio["endpoint_states"], map[string]any{"127.0.0.4:80": "healthy", "127.0.0.5:80": "degraded", "127.0.0.6:80": "unhealthy"}},
			{"spread distribute", spread["distribute"], []any{map[string]any{"from": "us-east/*", "to": map[string]any{"us-east/*": 70.0, "ap-south/*": 30.0}}}},
			{"api failover_priority", api["failover_priority"], nil},
			{"spread failover_priority", spread["failover_priority"], nil},
			{"sticky session_affinity_timeout_seconds", sticky["session_affinity_timeout_seconds"], 10800.0},
			{"wide load_aware", wide["load_aware"], map[string]any{"high": 3.0, "low": 1.0}},
			{"api load_aware", api["load_aware"], nil},
		}
		for _, c := range checks {
			if !reflect.DeepEqual(c.got, c.want) {
				t.Errorf("%s: %s = %#v, want %#v", format, c.what, c.got, c.want)
			}
		}
	}
}

// From an encoded tree, under allow_all, the tree does not tell degraded
// from unhealthy (both have flags 0): inspect says so rather than guess.
func TestInspectEncodedAllowAllStates(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "tree.bin")
	if code, _, errs := runCLI(t, "tree", "build", "-f", writePolicyTopology(t), "--out", bin); code != 0 {
		t.Fatal(errs)
	}
	code, out, errs := runCLI(t, "tree", "inspect", bin)
	if code != 0 || !strings.Contains(out, "127.0.0.4:80 127.0.0.5:80 (degraded or unhealthy)") ||
		!strings.Contains(out, "not eligible: 127.0.0.2:80 (degraded) 127.0.0.3:80 (unhealthy)") {
		t.Fatalf("exit %d, %s:\n%s", code, errs, out)
	}
}
