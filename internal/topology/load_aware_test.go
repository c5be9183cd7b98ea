package topology

import (
	"strings"
	"testing"
)

// load_aware is read like every other field: its keys are checked (a typo
// is refused with the key meant and the line, YAML and JSON alike) and its
// band reaches the model whole.
func TestLoadAwareKeys(t *testing.T) {
	const ep = "  endpoints: [{address: 127.0.0.1:1}]\n"
	top, err := Parse([]byte("services:\n- name: a\n  load_aware: {high: 8, low: 3}\n"+ep), "ok.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if la := top.Services[0].LoadAware; la == nil || *la.High != 8 || *la.Low != 3 {
		t.Fatalf("load_aware read as %+v, want high 8, low 3", la)
	}
	cases := []struct{ name, doc, want string }{
		{"typo.yaml", "services:\n- name: a\n  load_aware:\n    hihg: 3\n" + ep, "line 4: unknown key hihg (did you mean high?)"},
		{"typo.yaml", "services:\n- name: a\n  load_awrae: {high: 3}\n" + ep, "line 3: unknown key load_awrae (did you mean load_aware?)"},
		{"typo.json", "{\"services\": [{\"name\": \"a\",\n \"load_aware\": {\"lo\": 1},\n \"endpoints\": []}]}", "line 2: unknown key lo (did you mean low?)"},
	}
	for _, c := range cases {
		if _, err := Parse([]byte(c.doc), c.name); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse %s: %v; want %q", c.name, err, c.want)
		}
	}
}
