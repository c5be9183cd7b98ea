package topology

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/loctree/loctree/shared"
)

func TestDefaultBuilds(t *testing.T) {
	top := Default()
	tree, err := shared.Build(top, shared.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	regions := map[string]bool{}
	for _, s := range top.Services {
		for _, e := range s.Endpoints {
			regions[e.Locality["region"]] = true
			if !strings.HasPrefix(e.Address, "127.") {
				t.Errorf("%s: endpoint %s is outside 127.0.0.0/8", s.Name, e.Address)
			}
		}
		if !strings.HasPrefix(s.VIP, "127.77.") {
			t.Errorf("%s: vip %s is outside 127.77.0.0/16", s.Name, s.VIP)
		}
	}
	if len(regions) != 3 || tree.NumServices() < 4 {
		t.Errorf("default mesh has %d regions and %d services, want 3 and several", len(regions), tree.NumServices())
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct{ name, doc, want string }{
		{"empty", "", "empty topology"},
		{"no services", "services: []\n", "no services"},
		{"unknown field", "services:\n- name: a\n  endpoint: []\n", "line 3: unknown key endpoint (did you mean endpoints?)"},
		{"syntax", "services:\n- name: [a\n", "did not find expected"},
		{"bad weight", "services:\n- name: a\n  endpoints:\n  - address: 127.0.0.1:1\n    weight: -1\n", "line 5"},
		{"dup node", "services:\n- name: a\n  endpoints: []\nnodes:\n- name: n\n- name: n\n", `node "n"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.doc), "t.yaml")
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "t.yaml: ") {
				t.Fatalf("error %v, want it to name t.yaml and contain %q", err, c.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error spans lines: %q", err)
			}
		})
	}
}

func TestJSONTopology(t *testing.T) {
	doc := `{"services":[{"name":"a","mode":"strict","endpoints":[{"address":"127.0.0.1:80","locality":{"region":"r"},"weight":3,"healthy":false}]}]}`
	path := filepath.Join(t.TempDir(), "t.json")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	top, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	e := top.Services[0].Endpoints[0]
	if top.Services[0].Mode != "strict" || *e.Weight != 3 || *e.Healthy || e.Locality["region"] != "r" {
		t.Fatalf("decoded %+v", top.Services[0])
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"))
	if err == nil || !strings.Contains(err.Error(), "nope.yaml") {
		t.Fatalf("error %v, want it to name the file", err)
	}
}

func TestNodeLocality(t *testing.T) {
	top := Default()
	loc, err := NodeLocality(top, "node-a")
	if err != nil || loc["region"] == "" {
		t.Fatalf("node-a: %v %v", loc, err)
	}
	if _, err := NodeLocality(top, "node-zz"); err == nil || !strings.Contains(err.Error(), "node-a") {
		t.Fatalf("unknown node error %v should list the known nodes", err)
	}
}

// FuzzParse feeds arbitrary documents to the parser and the builder: both
// must return an error or a topology, never panic.
func FuzzParse(f *testing.F) {
	f.Add([]byte("services:\n- name: a\n  endpoints:\n  - address: 127.0.0.1:80\n    locality: {zone: z}\n"))
	f.Add([]byte(`{"services":[{"name":"a","endpoints":[{"address":"[::1]:80","weight":2}]}]}`))
	// The rules of issue 9: fractional weights, second documents, trailing
	// JSON, surrogate pairs, control characters, duplicate VIPs, non-unicast
	// endpoints.
	f.Add([]byte("services:\n- name: a\n  endpoints:\n  - address: 127.0.0.1:80\n    weight: 0.4\n"))
	f.Add([]byte("services:\n- name: a\n  endpoints: []\n---\nservices:\n- name: b\n  endpoints: []\n"))
	f.Add([]byte(`{"services":[{"name":"a","endpoints":[]}]} {"services":[]}`))
	f.Add([]byte(`{"services":[{"name":"\ud83d\ude00\u001b","endpoints":[{"address":"127.0.0.1:80","weight":2.5}]}]}`))
	f.Add([]byte("services:\n- {name: a, vip: '127.77.0.1:80', endpoints: []}\n- {name: b, vip: '[::ffff:127.77.0.1]:80', endpoints: []}\n"))
	f.Add([]byte("services:\n- name: a\n  endpoints:\n  - address: 224.0.0.1:80\n  - address: '[::]:80'\n"))
	f.Fuzz(func(t *testing.T, doc []byte) {
		top, err := Parse(doc, "fuzz.yaml")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.yaml: ") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error does not name the file on one line: %q", err)
			}
			return
		}
		tree, err := shared.Build(top, shared.BuildOptions{})
		if err == nil {
			checkBuilt(t, tree)
		}
	})
}

// checkBuilt holds a built tree to the rules of issue 9: printable names,
// unicast endpoints, one service per VIP.
func checkBuilt(t *testing.T, tree *shared.Tree) {
	vips := map[netip.AddrPort]bool{}
	for _, s := range tree.Services() {
		for _, v := range append(append([]string{s.Name()}, s.Hosts()...), s.Scopes()...) {
			if !utf8.ValidString(v) || strings.ContainsFunc(v, unicode.IsControl) {
				t.Fatalf("service %q: accepted %q", s.Name(), v)
			}
		}
		if s.VIP().IsValid() && vips[s.VIP()] {
			t.Fatalf("vip %s accepted twice", s.VIP())
		}
		vips[s.VIP()] = s.VIP().IsValid()
	}
	for i := range tree.NumEndpoints() {
		a := tree.Endpoint(uint32(i)).Addr.Addr()
		if a.IsUnspecified() || a.IsMulticast() {
			t.Fatalf("accepted endpoint %s", a)
		}
	}
}
