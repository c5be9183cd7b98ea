package topology

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/loctree/loctree/shared"
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

// Issue 20, section 4: a mesh-wide file whose endpoints carry every label
// while each service routes on its own subset loads: a qualified label key
// (with a prefix and '/', valid as a Kubernetes label key) that no scope of
// the service uses is accepted. What is likely a typo is refused with the
// key meant: a bare key near a well-known one, a qualified key near a
// well-known Kubernetes or Istio key or a scope. A bare key far from all is
// still refused, with the advice to qualify it; a qualified key that is not
// a valid label key is refused naming the rule.
func TestLocalityKeyRule(t *testing.T) {
	file := func(scopes, locality string) string {
		return "services:\n- name: a\n  scopes: " + scopes + "\n  endpoints:\n  - address: 127.0.0.1:1\n    locality: " + locality + "\n"
	}
	accept := []struct{ scopes, locality string }{
		{"[region, zone]", "{region: r1, zone: z1, topology.istio.io/cluster: c1}"},
		{"[region, zone]", "{region: r1, topology.kubernetes.io/zone: z1, kubernetes.io/hostname: n1}"},
		{"[region]", "{region: r1, example.com/rack: r7, loctree.example/Rack_2.b: x}"},
		{"[topology.istio.io/cluster]", "{topology.istio.io/cluster: c1, topology.istio.io/network: n1, node: n}"},
	}
	for _, c := range accept {
		if _, err := Parse([]byte(file(c.scopes, c.locality)), "mesh.yaml"); err != nil {
			t.Errorf("scopes %s, locality %s: %v", c.scopes, c.locality, err)
		}
	}
	refuse := []struct{ scopes, locality, want string }{
		{"[region, zone]", "{regoin: r1}", `unknown locality key "regoin"`},
		{"[region, zone]", "{regoin: r1}", `did you mean "region"?`},
		{"[region]", "{zonee: z1}", `did you mean "zone"?`},
		{"[region]", "{subzon: s}", `did you mean "subzone"?`},
		{"[region]", "{rack: r1}", "qualify it"},
		{"[region]", "{topology.kubernetes.io/zoen: z1}", `did you mean "topology.kubernetes.io/zone"?`},
		{"[region]", "{topology.istio.io/clustr: c1}", `did you mean "topology.istio.io/cluster"?`},
		{"[region]", "{topology.kubernetes.io.zone: z1}", `did you mean "topology.kubernetes.io/zone"?`},
		{"[region, example.com/rack]", "{region: r, example.com/rakc: r1}", `did you mean "example.com/rack"?`},
		{"[region]", "{Example.com/rack: r1}", "not a valid label key"},
		{"[region]", "{example.com/: r1}", "not a valid label key"},
		{"[region]", "{a/b/c: r1}", "not a valid label key"},
		{"[region]", "{example.com/-rack: r1}", "not a valid label key"},
	}
	for _, c := range refuse {
		_, err := Parse([]byte(file(c.scopes, c.locality)), "mesh.yaml")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("scopes %s, locality %s: %v, want %q", c.scopes, c.locality, err, c.want)
		}
	}
}

// TestLabelKeySyntax holds shared.CheckLabelKey to Kubernetes' own check of
// a label key (k8s.io/apimachinery validation.IsQualifiedName).
func TestLabelKeySyntax(t *testing.T) {
	long := strings.Repeat("a", 63)
	for _, k := range []string{
		"a", "A", "rack", "my.name", "123-abc", "MyName", "a_b", "example.com/rack", "topology.kubernetes.io/zone",
		long, "example.com/" + long, strings.Repeat("a.", 126) + "a/x", long + "a", "-a", "a-", "a b", "",
		"/a", "a/", "a/b/c", "Example.com/a", "ex_ample.com/a", "a..b/c", ".a/b", "a/-b", "é", "a/é", "a.b/c.d_e-F",
	} {
		want := len(validation.IsQualifiedName(k)) == 0
		if got := shared.CheckLabelKey(k) == nil; got != want {
			t.Errorf("CheckLabelKey(%q) valid = %v, apimachinery says %v (%v)", k, got, want, validation.IsQualifiedName(k))
		}
	}
}
