package topology

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Reliability: hostile topology files from issue 9, one case per item.

func parseErr(t *testing.T, doc string) error {
	t.Helper()
	_, err := Parse([]byte(doc), "t.yaml")
	if err != nil && !strings.HasPrefix(err.Error(), "t.yaml: ") {
		t.Errorf("error %q does not name the file", err)
	}
	return err
}

// Item 4: a FIFO (or any non-regular file) at the topology path is refused
// at once instead of blocking the reader forever.
func TestReliabilityFIFOTopology(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mesh.yaml")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() { _, err := Load(path); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") || !strings.Contains(err.Error(), path) {
			t.Fatalf("error %v, want one naming %s as not a regular file", err, path)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Load blocked on a FIFO for 2s")
	}
	if _, err := Load("/dev/null"); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("/dev/null: error %v, want not a regular file", err)
	}
}

// Item 5: a fractional weight is an error, never truncated (0.4 became 0).
func TestReliabilityFractionalWeight(t *testing.T) {
	for _, doc := range []string{
		"services:\n- name: a\n  endpoints:\n  - address: 127.0.0.1:1\n    weight: 0.4\n",
		"services:\n- name: a\n  endpoints:\n  - address: 127.0.0.1:1\n    weight: 2.7\n",
		"services:\n- name: a\n  endpoints:\n  - address: 127.0.0.1:1\n    weight: 1e3\n",
		`{"services":[{"name":"a","endpoints":[{"address":"127.0.0.1:1","weight":2.7}]}]}`,
	} {
		err := parseErr(t, doc)
		if err == nil || !strings.Contains(err.Error(), "weight") || !strings.Contains(err.Error(), "line ") {
			t.Errorf("%q: error %v, want one about the weight with its line", doc, err)
		}
	}
	top, err := Parse([]byte("services:\n- name: a\n  endpoints:\n  - address: 127.0.0.1:1\n    weight: 3\n"), "t.yaml")
	if err != nil || *top.Services[0].Endpoints[0].Weight != 3 {
		t.Fatalf("integer weight: %v", err)
	}
}

// Item 7: a second YAML document, or data after the JSON object, is an
// error rather than silently ignored.
func TestReliabilityTrailingDocuments(t *testing.T) {
	one := "services:\n- name: a\n  endpoints:\n  - address: 127.0.0.1:1\n"
	for _, doc := range []string{
		one + "---\nservices:\n- name: b\n  endpoints: []\n",
		one + "---\n{}\n",
		`{"services":[{"name":"a","endpoints":[]}]}{"services":[]}`,
		`{"services":[{"name":"a","endpoints":[]}]} x`,
	} {
		err := parseErr(t, doc)
		if err == nil || !strings.Contains(err.Error(), "line ") || !(strings.Contains(err.Error(), "second") || strings.Contains(err.Error(), "after")) {
			t.Errorf("%q: error %v, want one about the extra document with its line", doc, err)
		}
	}
	if err := parseErr(t, one+"---\n"); err != nil {
		t.Errorf("a trailing document marker alone: %v", err)
	}
}

// Item 9: a topology file larger than the limit is refused before it is
// read, and a stream is never read past the limit.
func TestReliabilityTopologySizeBound(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(path, []byte(strings.Repeat("#\n", 600)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := readFile(path, 1024)
	if err == nil || !strings.Contains(err.Error(), "1024") || !strings.Contains(err.Error(), path) {
		t.Fatalf("error %v, want one naming the file and the 1024-byte limit", err)
	}
}

// Item 14: JSON is decoded as JSON: a surrogate-pair escape is valid, and
// errors carry a line.
func TestReliabilityJSONIsJSON(t *testing.T) {
	top, err := Parse([]byte(`{"services":[{"name":"smile-\ud83d\ude00","endpoints":[{"address":"127.0.0.1:80"}]}]}`), "t.json")
	if err != nil {
		t.Fatalf("surrogate pair: %v", err)
	}
	if top.Services[0].Name != "smile-😀" {
		t.Fatalf("name %q", top.Services[0].Name)
	}
	if _, err := Parse([]byte("{services: [{name: a, endpoints: []}]}"), "t.yaml"); err != nil {
		t.Fatalf("a YAML flow mapping is still YAML: %v", err)
	}
	for doc, want := range map[string]string{
		"{\n\"services\": [\n{\"name\": \"a\", \"endpoint\": []}]}": "line 3",
		"{\n\"services\": [\n{\"name\": 7}]}":                       "line 3",
		"{\n\"services\": [\n{\"name\": \"a\",]}":                   "line 3",
		"{\n\"services\": [\n{\"name\": \"a\"},\n":                  "ends early",
		"{\"services\": {}}":                                        "want a list",
		"{\"services\": [], \"x\": 1}":                              `unknown key x`,
	} {
		_, err := Parse([]byte(doc), "t.json")
		if err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "t.json: ") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error %v, want one line naming t.json and %s", doc, err, want)
		}
	}
}
