package topology

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// Issue 26 item 7: a number that does not fit an integer field is an
// error naming the field and its line, in YAML as in JSON, never a
// truncated value (yaml.v3 decodes overprovisioning_factor: 1.4 as 1).
func TestIntegerFieldsRefuseWhatDoesNotFit(t *testing.T) {
	const ep = "  endpoints: [{address: 127.0.0.1:1}]\n"
	const spill = "- name: a\n  spillover:\n"
	cases := []struct {
		name, doc string
		want      []string
	}{
		{"of.yaml", "services:\n" + spill + "    overprovisioning_factor: 1.4\n" + ep,
			[]string{"line 4: ", "overprovisioning_factor", "1.4", "percent: 140 means 1.4", "write 140"}},
		{"of.yaml", "services:\n" + spill + "    overprovisioning_factor: 140.0\n" + ep,
			[]string{"line 4: ", "overprovisioning_factor", "percent: 140 means 1.4"}},
		{"of.yaml", "services:\n" + spill + "    overprovisioning_factor: -140\n" + ep,
			[]string{"line 4: ", "overprovisioning_factor", "-140", "percent: 140 means 1.4"}},
		{"of.yaml", "services:\n" + spill + "    overprovisioning_factor: 4294967436\n" + ep,
			[]string{"line 4: ", "overprovisioning_factor", "4294967436"}},
		{"panic.yaml", "services:\n" + spill + "    panic_threshold: 50.9\n" + ep,
			[]string{"line 4: ", "panic_threshold", "50.9", "whole percent"}},
		{"panic.yaml", "services:\n" + spill + "    panic_threshold: 5e1\n" + ep,
			[]string{"line 4: ", "panic_threshold", "5e1"}},
		{"timeout.yaml", "services:\n- name: a\n  policy: consistent_hash\n  session_affinity: {timeout_seconds: 1.5}\n" + ep,
			[]string{"line 4: ", "timeout_seconds", "1.5", "whole seconds"}},
		{"timeout.yaml", "services:\n- name: a\n  policy: consistent_hash\n  session_affinity: {timeout_seconds: -1}\n" + ep,
			[]string{"line 4: ", "timeout_seconds", "-1", "whole seconds"}},
		{"dist.yaml", "services:\n- name: a\n  spillover: {}\n  distribute:\n  - from: r1\n    to: {r1: 50.5, r2: 49.5}\n" + ep,
			[]string{"line 6: ", "distribute", "50.5", "whole percent"}},
		{"load.yaml", "services:\n- name: a\n  load_aware: {high: 2.5}\n" + ep,
			[]string{"line 3: ", "high", "2.5", "requests in flight per endpoint"}},
		{"load.yaml", "services:\n- name: a\n  load_aware:\n    high: 4\n    low: -1\n" + ep,
			[]string{"line 5: ", "low", "-1", "requests in flight per endpoint"}},
		{"weight.yaml", "services:\n- name: a\n  endpoints:\n  - address: 127.0.0.1:1\n    weight: -2\n",
			[]string{"line 5: ", "weight", "-2", "0 to 4294967295"}},
		{"weight.yaml", "services:\n- name: a\n  endpoints:\n  - address: 127.0.0.1:1\n    weight: 4294967296\n",
			[]string{"line 5: ", "weight", "4294967296", "0 to 4294967295"}},
		{"alias.yaml", "services:\n- name: &f 1.4\n  spillover:\n    overprovisioning_factor: *f\n" + ep,
			[]string{"overprovisioning_factor", "1.4", "percent: 140 means 1.4"}},

		{"of.json", "{\"services\": [{\"name\": \"a\",\n \"spillover\": {\"overprovisioning_factor\": 1.4},\n \"endpoints\": [{\"address\": \"127.0.0.1:1\"}]}]}",
			[]string{"line 2: ", "overprovisioning_factor", "1.4", "percent: 140 means 1.4", "write 140"}},
		{"panic.json", "{\"services\": [{\"name\": \"a\",\n \"spillover\": {\"panic_threshold\": 50.9},\n \"endpoints\": [{\"address\": \"127.0.0.1:1\"}]}]}",
			[]string{"line 2: ", "panic_threshold", "50.9", "whole percent"}},
		{"timeout.json", "{\"services\": [{\"name\": \"a\", \"policy\": \"consistent_hash\",\n \"session_affinity\": {\"timeout_seconds\": 99999999999},\n \"endpoints\": [{\"address\": \"127.0.0.1:1\"}]}]}",
			[]string{"line 2: ", "timeout_seconds", "99999999999", "whole seconds"}},
		{"load.json", "{\"services\": [{\"name\": \"a\",\n \"load_aware\": {\"low\": 0.8},\n \"endpoints\": [{\"address\": \"127.0.0.1:1\"}]}]}",
			[]string{"line 2: ", "low", "0.8", "requests in flight per endpoint"}},
		{"dist.json", "{\"services\": [{\"name\": \"a\", \"spillover\": {},\n \"distribute\": [{\"from\": \"r1\", \"to\": {\"r1\": 50.5, \"r2\": 49.5}}],\n \"endpoints\": [{\"address\": \"127.0.0.1:1\"}]}]}",
			[]string{"line 2: ", "distribute", "50.5", "whole percent"}},
	}
	for _, c := range cases {
		_, err := Parse([]byte(c.doc), c.name)
		checkAll(t, "Parse "+c.name, c.doc, err, c.want)
		path := filepath.Join(t.TempDir(), c.name)
		if err := os.WriteFile(path, []byte(c.doc), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err = Load(filepath.Dir(path))
		checkAll(t, "Load(DIR) "+c.name, c.doc, err, c.want)
	}
}

// TestIntegerFieldsTakeWholeNumbers: what fits is read as written, in
// every notation YAML gives a whole number.
func TestIntegerFieldsTakeWholeNumbers(t *testing.T) {
	doc := "services:\n- name: a\n  spillover: {overprovisioning_factor: 0x8c, panic_threshold: 0}\n  endpoints: [{address: 127.0.0.1:1, weight: 4294967295}]\n"
	top, err := Parse([]byte(doc), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := top.Services[0]
	if *s.Spillover.OverprovisioningFactor != 140 || *s.Spillover.PanicThreshold != 0 || *s.Endpoints[0].Weight != 4294967295 {
		t.Errorf("read %+v %+v", *s.Spillover, s.Endpoints[0])
	}
}

func checkAll(t *testing.T, what, doc string, err error, want []string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: accepted, want an error with %q\n%s", what, want, doc)
		return
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: %v\nwant it to say %q\n%s", what, err, w, doc)
		}
	}
}

// TestEveryIntegerFieldHasAHint walks the model: every key of an integer
// type (or a map of them) says what it takes when a number does not fit.
func TestEveryIntegerFieldHasAHint(t *testing.T) {
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type)
	walk = func(t0 reflect.Type) {
		t0 = elem(t0)
		if seen[t0] || t0.Kind() != reflect.Struct {
			return
		}
		seen[t0] = true
		names, types := structKeys(t0, "yaml")
		for _, n := range names {
			ft := elem(types[n])
			if ft.Kind() == reflect.Map || ft.Kind() == reflect.Slice {
				ft = elem(ft.Elem())
			}
			if isInteger(ft) && numberHints[n] == "" {
				t.Errorf("%s.%s is an integer field without a hint in numberHints", t0.Name(), n)
			}
			walk(ft)
		}
	}
	walk(topologyType)
	if len(seen) < 5 {
		t.Errorf("walked %d types of the model, want all of them", len(seen))
	}
}
