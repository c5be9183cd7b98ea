package topology

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loctree/loctree/shared"
)

func svcJSON(name string, port int) string {
	return fmt.Sprintf(`{"name": %q, "vip": "127.77.0.1:%d", "endpoints": [{"address": "127.0.0.1:%d", "locality": {"zone": "z\"1"}}]}`, name, port, port)
}

func topJSON(svcs ...string) string {
	return `{"services": [` + strings.Join(svcs, ",\n") + `], "nodes": [{"name": "n1", "locality": {"zone": "z1"}}]}`
}

func dirJSON(svc string) string { return `{"services": [` + svc + `]}` }

// TestSplitMatchesParse: the service-by-service reading of a JSON topology
// decodes to what Parse decodes.
func TestSplitMatchesParse(t *testing.T) {
	for _, doc := range []string{
		topJSON(svcJSON("a", 1), svcJSON("b", 2)),
		`{"services":[]}`,
		" {\n\"nodes\": [], \"services\": [ {\"name\":\"x\",\"scopes\":[\"a]}\"],\"endpoints\":[{\"address\":\"127.0.0.1:1\",\"locality\":{\"a]}\":\"\\\\\"}}]} ] }\n",
		"services:\n- name: a\n  endpoints:\n  - address: 127.0.0.1:1\n",
	} {
		want, werr := Parse([]byte(doc), "t")
		doc2, err := split([]byte(doc), "t")
		if err == nil {
			var specs []shared.ServiceSpec
			for _, p := range doc2.parts {
				s, derr := p.decode([]byte(doc), "t")
				if derr != nil {
					t.Fatalf("%q: %v", doc, derr)
				}
				specs = append(specs, *s)
			}
			if werr == nil && (!reflect.DeepEqual(specs, want.Services) || !reflect.DeepEqual(doc2.nodes, want.Nodes)) {
				t.Errorf("%q: split gives %+v, Parse %+v", doc, specs, want.Services)
			}
		}
		if werr == nil && err != nil {
			t.Errorf("%q: Parse accepts, split: %v", doc, err)
		}
	}
}

// TestSplitErrors: what Parse refuses at the top level, split refuses, with
// the file and line.
func TestSplitErrors(t *testing.T) {
	for doc, want := range map[string]string{
		`{"services": [` + svcJSON("a", 1) + `] } x`:                                                    "data after",
		`{"services": [` + svcJSON("a", 1) + ` ` + svcJSON("b", 2) + `]}`:                               "line 1",
		`{"services": [` + svcJSON("a", 1) + `], "extra": 1}`:                                           `unknown key extra`,
		`{"services": [` + svcJSON("a", 1):                                                              "ends early",
		`{"services": [{"name": "a", "endpoints": [}]}`:                                                 "line 1",
		`{"services": [{"name": "a"}, {"name": "a"}]}`:                                                  `service "a" appears twice`,
		`{"services": [{"name": "a", "colour": 1}]}`:                                                    `unknown key colour`,
		"{\"services\": [\n{\"name\": \"a\", \"endpoints\": [{\"address\": \"x\", \"weight\": 2.5}]}]}": "line 2",
		`{"services": "a"}`: "want a list",
	} {
		_, err := parseParts([]byte(doc), "f.json")
		if err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "f.json: ") {
			t.Errorf("%q: error %v, want one naming f.json and mentioning %q", doc, err, want)
		}
	}
}

// parseParts decodes every part of a document, as a first Poll does.
func parseParts(data []byte, name string) ([]shared.ServiceSpec, error) {
	var f Files
	d, err := split(data, name)
	if err != nil {
		return nil, err
	}
	ch, err := f.diff([]*document{d}, map[*document][]byte{d: data})
	if err != nil {
		return nil, err
	}
	return ch.Services()
}

func writeFile(t testing.TB, path, data string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func names(specs []shared.ServiceSpec) []string {
	var out []string
	for _, s := range specs {
		out = append(out, s.Name)
	}
	slices.Sort(out)
	return out
}

func poll(t *testing.T, f *Files) *Change {
	t.Helper()
	ch, err := f.Poll()
	if err != nil {
		t.Fatal(err)
	}
	if ch != nil {
		ch.Commit()
	}
	return ch
}

func expectChange(t *testing.T, ch *Change, upserts, removes []string) {
	t.Helper()
	if ch == nil {
		t.Fatalf("no change, want upserts %v removes %v", upserts, removes)
	}
	specs, err := ch.Services()
	if err != nil {
		t.Fatal(err)
	}
	if got := names(specs); !slices.Equal(got, upserts) || !slices.Equal(ch.Removes, removes) || !slices.Equal(got, slices.Sorted(slices.Values(ch.Names))) {
		t.Fatalf("upserts %v removes %v, want %v %v", got, ch.Removes, upserts, removes)
	}
}

// TestFilesDeliversChanges: a topology file's changes arrive per service;
// a rejected file keeps the last good state as the base of the next diff.
func TestFilesDeliversChanges(t *testing.T) {
	for _, ext := range []string{"json", "yaml"} {
		t.Run(ext, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "mesh."+ext)
			doc := func(svcs ...string) string {
				if ext == "json" {
					return topJSON(svcs...)
				}
				return "services: [" + strings.Join(svcs, ", ") + "]\n"
			}
			writeFile(t, path, doc(svcJSON("a", 1), svcJSON("b", 2), svcJSON("c", 3)))
			f := NewFiles(path)
			expectChange(t, poll(t, f), []string{"a", "b", "c"}, nil)
			if ch := poll(t, f); ch != nil {
				t.Fatalf("unchanged file gave %+v", ch)
			}
			writeFile(t, path, doc(svcJSON("c", 3), svcJSON("a", 1), svcJSON("b", 9)))
			expectChange(t, poll(t, f), []string{"b"}, nil)
			writeFile(t, path, doc(svcJSON("a", 1), svcJSON("b", 9)))
			expectChange(t, poll(t, f), nil, []string{"c"})
			writeFile(t, path, doc(svcJSON("a", 1), `{"name": "b", "colour": 1}`))
			ch, err := f.Poll()
			if err == nil { // JSON: the bad service is decoded only when built
				_, err = ch.Services()
			}
			if err == nil || !strings.Contains(err.Error(), path) {
				t.Fatalf("bad service: error %v, want one naming %s", err, path)
			}
			if ch, err := f.Poll(); ch != nil || err != nil {
				t.Fatalf("the same bad file again: %+v %v, want nothing", ch, err)
			}
			writeFile(t, path, doc(svcJSON("a", 2), svcJSON("b", 9)))
			expectChange(t, poll(t, f), []string{"a"}, nil)
		})
	}
}

// TestFilesDirectory: a directory of per-service files; a change to one
// file reads and decodes that file only.
func TestFilesDirectory(t *testing.T) {
	dir := t.TempDir()
	for i, n := range []string{"a", "b", "c"} {
		writeFile(t, filepath.Join(dir, n+".json"), dirJSON(svcJSON(n, i+1)))
	}
	writeFile(t, filepath.Join(dir, "README"), "not a topology")
	f := NewFiles(dir)
	expectChange(t, poll(t, f), []string{"a", "b", "c"}, nil)
	time.Sleep(2 * coarseClock)
	poll(t, f) // reads the files written within the clock's granularity again
	writeFile(t, filepath.Join(dir, "b.json"), dirJSON(svcJSON("b", 7)))
	reads := f.reads
	expectChange(t, poll(t, f), []string{"b"}, nil)
	if f.reads != reads+1 {
		t.Fatalf("read %d files for a change to one", f.reads-reads)
	}
	writeFile(t, filepath.Join(dir, "d.yaml"), "services:\n- name: d\n  endpoints: []\n")
	expectChange(t, poll(t, f), []string{"d"}, nil)
	os.Remove(filepath.Join(dir, "a.json"))
	expectChange(t, poll(t, f), nil, []string{"a"})
	writeFile(t, filepath.Join(dir, "e.json"), dirJSON(svcJSON("b", 8)))
	if _, err := f.Poll(); err == nil || !strings.Contains(err.Error(), `service "b" appears twice`) {
		t.Fatalf("a service in two files: %v", err)
	}
	os.Remove(filepath.Join(dir, "e.json"))
	if err := syscall.Mkfifo(filepath.Join(dir, "f.json"), 0o600); err != nil {
		t.Skip(err)
	}
	done := make(chan error, 1)
	go func() { _, err := f.Poll(); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("FIFO in the directory: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Poll blocked on a FIFO")
	}
}

// TestFilesDirectoryBounded: the files of a directory count together
// against MaxFileSize.
func TestFilesDirectoryBounded(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"a", "b"} {
		f, err := os.Create(filepath.Join(dir, n+".json"))
		if err != nil {
			t.Fatal(err)
		}
		f.Truncate(MaxFileSize/2 + 1)
		f.Close()
	}
	if _, err := NewFiles(dir).Poll(); err == nil || !strings.Contains(err.Error(), "size limit") {
		t.Fatalf("error %v, want the size limit", err)
	}
}

// scaleDoc is a JSON topology of services × 100 endpoints (~8.7 MB at
// 1,000 services) with service s at version v[s].
func scaleDoc(services int, v []int) []byte {
	var b strings.Builder
	b.WriteString(`{"services":[`)
	for s := range services {
		if s > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, `{"name":"svc-%04d","vip":"127.77.%d.%d:80","endpoints":[`, s, s/250, s%250+1)
		for i := range 100 {
			if i > 0 {
				b.WriteByte(',')
			}
			k := s*100 + i + v[s]
			fmt.Fprintf(&b, `{"address":"127.%d.%d.%d:9700","locality":{"region":"r%d","zone":"z%d","subzone":"s%d"}}`, 1+k>>16&0x7f, k>>8&0xff, k&0xff, i%3, i%9, i%27)
		}
		b.WriteString("]}")
	}
	b.WriteString("]}\n")
	return []byte(b.String())
}

// BenchmarkFilesChange: one service of a 1,000-service, 100,000-endpoint
// JSON file changes; Poll reads the file, cuts it, finds the one changed
// service and decodes it (what the agent does per change before building),
// next to Parse of the same file (what it did before).
func BenchmarkFilesChange(b *testing.B) {
	path := filepath.Join(b.TempDir(), "mesh.json")
	v := make([]int, 1000)
	docs := [2][]byte{scaleDoc(1000, v), nil}
	v[500] = 1
	docs[1] = scaleDoc(1000, v)
	b.Logf("%d bytes", len(docs[0]))
	f := NewFiles(path)
	os.WriteFile(path, docs[0], 0o600)
	if ch, err := f.Poll(); err != nil {
		b.Fatal(err)
	} else {
		ch.Commit()
	}
	b.Run("poll", func(b *testing.B) {
		i := 0
		for b.Loop() {
			i++
			b.StopTimer()
			writeFile(b, path, string(docs[i%2]))
			b.StartTimer()
			ch, err := f.Poll()
			if err != nil || ch == nil || len(ch.Names) != 1 {
				b.Fatalf("%v %v", ch, err)
			}
			if _, err := ch.Services(); err != nil {
				b.Fatal(err)
			}
			ch.Commit()
		}
	})
	b.Run("parse", func(b *testing.B) {
		for b.Loop() {
			data, err := ReadFile(path)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := Parse(data, path); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestFilesRejectedNotReread: a file whose change was not committed (its
// new service failed to decode or install) is not read again on every
// Poll while it stays as it is; fixing it is seen.
func TestFilesRejectedNotReread(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mesh.json")
	writeFile(t, path, topJSON(svcJSON("a", 1)))
	f := NewFiles(path)
	expectChange(t, poll(t, f), []string{"a"}, nil)
	writeFile(t, path, topJSON(svcJSON("a", 1), `{"name": "b", "colour": 1}`))
	ch, err := f.Poll()
	if err != nil || ch == nil {
		t.Fatalf("%v %v", ch, err)
	}
	if _, err := ch.Services(); err == nil {
		t.Fatal("bad service decoded")
	}
	time.Sleep(2 * coarseClock)
	f.Poll() // may read once more: written within the clock's granularity
	reads := f.reads
	for range 5 {
		if ch, err := f.Poll(); ch != nil || err != nil {
			t.Fatalf("unchanged rejected file: %v %v", ch, err)
		}
	}
	if f.reads != reads {
		t.Fatalf("read the unchanged file %d times in 5 polls", f.reads-reads)
	}
	writeFile(t, path, topJSON(svcJSON("a", 1), svcJSON("b", 2)))
	expectChange(t, poll(t, f), []string{"b"}, nil)
}

// FuzzSplit: reading a document service by service (split, the name scan,
// then decoding each service) accepts exactly the documents Parse accepts
// (or refuses one that Build would refuse), with the same services, and
// fails with the file's name on one line.
func FuzzSplit(f *testing.F) {
	f.Add([]byte(topJSON(svcJSON("a", 1), svcJSON("b", 2))))
	f.Add([]byte(`{"services":[{"name":"a","name":"b","endpoints":[]}],"services":[{"name":"c"}]}`))
	f.Add([]byte(`{"nodes":null,"services":[{"name":"\u00e9\"]}","hosts":["x"],"endpoints":[{"address":"[::1]:80","weight":2,"healthy":false}]}]}`))
	f.Add([]byte(`{"services":[{"name":"a"} ,{"name":1}]}`))
	f.Add([]byte(`{"services":[{"name":"a","endpoints":[{"address":"127.0.0.1:1","weight":2.5}]}]}`))
	f.Add([]byte(`{"services":[[1,{"a":"]"}]]}`))
	f.Add([]byte("services:\n- name: a\n  endpoints: []\n"))
	f.Fuzz(func(t *testing.T, doc []byte) {
		want, werr := Parse(doc, "f.json")
		var got []shared.ServiceSpec
		var nodes []shared.NodeSpec
		d, err := split(doc, "f.json")
		if err == nil {
			var ch *Change
			if ch, err = NewFiles("f.json").diff([]*document{d}, map[*document][]byte{d: doc}); err == nil {
				got, err = ch.Services()
				nodes = ch.Nodes
			}
		}
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.json") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error does not name the file on one line: %q", err)
			}
		}
		switch {
		case werr == nil && err != nil:
			// It may refuse earlier what Build refuses (a repeated name).
			if _, berr := shared.Build(want, shared.BuildOptions{}); berr == nil {
				t.Fatalf("Parse and Build accept, the service-by-service reading says %v", err)
			}
		case werr != nil && err == nil:
			t.Fatalf("Parse refuses (%v), the service-by-service reading accepts", werr)
		case err == nil && (!reflect.DeepEqual(got, want.Services) || len(nodes)+len(want.Nodes) > 0 && !reflect.DeepEqual(nodes, want.Nodes)):
			t.Fatalf("services %+v, Parse's %+v", got, want.Services)
		}
	})
}

// TestFilesChangeKeptPastBadEntry: a change made while another entry of the
// directory cannot be read (a symlink loop, a dangling symlink) is applied
// once that entry is gone; the bad entry is reported once, not on every
// Poll.
func TestFilesChangeKeptPastBadEntry(t *testing.T) {
	for name, bad := range map[string]func(dir string){
		"symlink loop": func(dir string) {
			os.Symlink("l2.yaml", filepath.Join(dir, "l1.yaml"))
			os.Symlink("l1.yaml", filepath.Join(dir, "l2.yaml"))
		},
		"dangling symlink": func(dir string) { os.Symlink("/nonexistent", filepath.Join(dir, "zz.yaml")) },
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "b.yml"), dirJSON(svcJSON("b", 1)))
			f := NewFiles(dir)
			expectChange(t, poll(t, f), []string{"b"}, nil)
			bad(dir)
			writeFile(t, filepath.Join(dir, "b.yml"), dirJSON(svcJSON("b", 2)))
			if _, err := f.Poll(); err == nil {
				t.Fatal("a bad entry in the directory: no error")
			}
			for range 3 {
				if ch, err := f.Poll(); ch != nil || err != nil {
					t.Fatalf("the same bad entry again: %+v %v, want nothing", ch, err)
				}
			}
			for _, n := range []string{"l1.yaml", "l2.yaml", "zz.yaml"} {
				os.Remove(filepath.Join(dir, n))
			}
			expectChange(t, poll(t, f), []string{"b"}, nil)
		})
	}
}

// TestFilesEmptyDirectory: a directory with no topology files is an error
// on the first Poll, not an empty change.
func TestFilesEmptyDirectory(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "README"), "not a topology")
	if ch, err := NewFiles(dir).Poll(); err == nil || !strings.Contains(err.Error(), "no services") {
		t.Fatalf("empty directory: %+v %v, want an error saying it has no services", ch, err)
	}
}
