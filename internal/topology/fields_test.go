package topology

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 20, section 2: a misspelt key of a topology is named with its line
// and the nearest key of the same object, in YAML and in JSON, whether the
// file is read whole (Parse) or service by service (Files, as the agent
// reads it): not "field polcy not found in type shared.ServiceSpec".
func TestUnknownKeyNamed(t *testing.T) {
	cases := []struct {
		name, doc, want string
	}{
		{"t.yaml", "services:\n- name: a\n  polcy: random\n  endpoints: [{address: 127.0.0.1:1}]\n",
			"line 3: unknown key polcy (did you mean policy?)"},
		{"t.yaml", "services:\n- name: a\n  spilover: {}\n  endpoints: [{address: 127.0.0.1:1}]\n",
			"line 3: unknown key spilover (did you mean spillover?)"},
		{"t.yaml", "services:\n- name: a\n  endpoints:\n  - adress: 127.0.0.1:1\n",
			"line 4: unknown key adress (did you mean address?)"},
		{"t.yaml", "services:\n- name: a\n  spillover: {panic_treshold: 3}\n  endpoints: [{address: 127.0.0.1:1}]\n",
			"line 3: unknown key panic_treshold (did you mean panic_threshold?)"},
		{"t.yaml", "servics: []\n", "line 1: unknown key servics (did you mean services?)"},
		{"t.yaml", "services:\n- name: a\n  endpoints: [{address: 127.0.0.1:1}]\nnodes:\n- {name: n, localty: {}}\n",
			"line 5: unknown key localty (did you mean locality?)"},
		{"t.yaml", "services:\n- name: a\n  colour: red\n  endpoints: [{address: 127.0.0.1:1}]\n",
			"line 3: unknown key colour (the keys here: name, hosts"},
		{"t.json", "{\"services\": [\n {\"name\": \"a\",\n  \"polcy\": \"random\",\n  \"endpoints\": [{\"address\": \"127.0.0.1:1\"}]}]}",
			"line 3: unknown key polcy (did you mean policy?)"},
		{"t.json", "{\"services\": [{\"name\": \"a\", \"endpoints\": [\n  {\"address\": \"127.0.0.1:1\", \"locality\": {\"region\": \"r\"}},\n  {\"adress\": \"127.0.0.1:2\"}]}]}",
			"line 3: unknown key adress (did you mean address?)"},
		{"t.json", "{\"services\": [{\"name\": \"a\",\n \"spilover\": {}, \"endpoints\": [{\"address\": \"127.0.0.1:1\"}]}]}",
			"line 2: unknown key spilover (did you mean spillover?)"},
		{"t.json", "{\"services\": [{\"name\": \"a\", \"endpoints\": [{\"address\": \"127.0.0.1:1\"}]}],\n \"node\": []}",
			"line 2: unknown key node (did you mean nodes?)"},
		{"t.json", "{\"services\": [{\"name\": \"a\", \"endpoints\": [{\"address\": \"127.0.0.1:1\"}]}],\n \"nodes\": [{\"name\": \"n\",\n \"localty\": {}}]}",
			"line 3: unknown key localty (did you mean locality?)"},
	}
	for _, c := range cases {
		_, err := Parse([]byte(c.doc), c.name)
		if err == nil || !strings.Contains(err.Error(), c.name+": "+c.want) || strings.Contains(err.Error(), "shared.") {
			t.Errorf("Parse %s: %v\nwant %q\n%s", c.name, err, c.want, c.doc)
		}
		dir := t.TempDir()
		path := filepath.Join(dir, c.name)
		if err := os.WriteFile(path, []byte(c.doc), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err = Load(dir)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "shared.") {
			t.Errorf("Load(DIR) %s: %v\nwant %q\n%s", c.name, err, c.want, c.doc)
		}
	}
}
