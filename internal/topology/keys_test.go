package topology

import (
	"strings"
	"testing"
)

// TestUnknownLocalityKey: a locality key that is neither well known nor a
// scope of the endpoint's service is a typo that would route the endpoint
// as if that value were empty: refused, with the nearest known key, from a
// whole file and from the per-service reading (with the line). Well-known
// keys the service does not route on, and label keys it routes on, pass.
func TestUnknownLocalityKey(t *testing.T) {
	good := `services:
- name: a
  scopes: [region, zone]
  endpoints:
  - address: 127.0.0.1:1
    locality: {region: r1, zone: z1, subzone: s1}
- name: b
  scopes: [topology.istio.io/cluster, "rack=r9"]
  endpoints:
  - address: 127.0.0.1:2
    locality: {topology.istio.io/cluster: c1, rack: r9, region: r1}
`
	if _, err := Parse([]byte(good), "good.yaml"); err != nil {
		t.Fatalf("well-known and scope keys: %v", err)
	}
	typo := strings.Replace(good, "{region: r1, zone: z1", "{regoin: r1, zone: z1", 1)
	_, err := Parse([]byte(typo), "typo.yaml")
	if err == nil || !strings.Contains(err.Error(), `unknown locality key "regoin"`) || !strings.Contains(err.Error(), `did you mean "region"?`) {
		t.Fatalf("typo.yaml: %v; want the unknown key and the nearest known one", err)
	}
	js := `{"services": [
{"name": "a", "endpoints": [{"address": "127.0.0.1:1", "locality": {"region": "r1"}}]},
{"name": "b", "endpoints": [{"address": "127.0.0.1:2", "locality": {"rack": "r1"}}]}]}`
	if _, err := Parse([]byte(js), "t.json"); err == nil || !strings.Contains(err.Error(), `unknown locality key "rack"`) {
		t.Fatalf("Parse t.json: %v", err)
	}
	d, err := split([]byte(js), "t.json")
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.parts[1].decode([]byte(js), "t.json")
	if err == nil || !strings.Contains(err.Error(), "t.json: line 3:") || !strings.Contains(err.Error(), `unknown locality key "rack"`) {
		t.Fatalf("per-service reading of t.json: %v; want the line and the key", err)
	}
}
