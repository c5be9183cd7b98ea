package file

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/loctree/loctree/loader/source"
)

func svcJSON(name string, port int) string {
	return fmt.Sprintf(`{"services": [{"name": %q, "vip": "127.77.0.1:%d", "endpoints": [{"address": "127.0.0.1:%d"}]}]}`, name, port, port)
}

// writeFile replaces path atomically, as docs/TOPOLOGY.md asks writers to.
func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// agent stands for the agent: it receives each update, answers it with
// the result reject gives (nil: applied), and records what it saw.
type agent struct {
	updates chan source.Update
	reject  func(source.Update) error
}

func (a *agent) publish(u source.Update) error {
	a.updates <- u
	if a.reject != nil {
		return a.reject(u)
	}
	return nil
}

// run starts s with a, and stops it when the test ends.
func run(t *testing.T, s *Source, a *agent) <-chan error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, a.publish) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("Run did not return after its context ended")
		}
	})
	return done
}

// next waits for the next update.
func next(t *testing.T, a *agent, what string) source.Update {
	t.Helper()
	select {
	case u := <-a.updates:
		return u
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: no update within 5s", what)
		return source.Update{}
	}
}

// quiet wants no update for a few polls.
func quiet(t *testing.T, a *agent, what string) {
	t.Helper()
	select {
	case u := <-a.updates:
		t.Fatalf("%s: got %+v, want no update", what, u)
	case <-time.After(100 * time.Millisecond):
	}
}

// wantChange wants an update of the named services, each with the port
// given, read through the update's Services.
func wantChange(t *testing.T, u source.Update, ports map[string]int) {
	t.Helper()
	if u.Err != nil || !u.Whole {
		t.Fatalf("update %+v, want a whole change", u)
	}
	var names []string
	for name, port := range ports {
		names = append(names, name)
		spec, err := u.Services.Spec(name)
		if port == 0 {
			if u.Services.Has(name) {
				t.Fatalf("%s: still there, want removed", name)
			}
			continue
		}
		if err != nil || !strings.HasSuffix(spec.Endpoints[0].Address, fmt.Sprint(":", port)) {
			t.Fatalf("%s: spec %+v (%v), want port %d", name, spec, err, port)
		}
	}
	slices.Sort(names)
	if !slices.Equal(u.Changed, names) {
		t.Fatalf("changed %v, want %v", u.Changed, names)
	}
}

// TestSourceDirectoryPastBadEntries: in a watched directory, a symlink loop
// or a dangling symlink is published as an error once (not silently
// skipped, not on every poll), a change made meanwhile is held back, and
// it is published once the bad entry is gone.
func TestSourceDirectoryPastBadEntries(t *testing.T) {
	for name, bad := range map[string][]string{
		"symlink loop":     {"l1.yaml", "l2.yaml", "l2.yaml", "l1.yaml"},
		"dangling symlink": {"/nonexistent", "zz.yaml"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "b.yml"), svcJSON("b", 1))
			a := &agent{updates: make(chan source.Update, 8)}
			run(t, New(Config{Path: dir, Interval: 10 * time.Millisecond}), a)
			wantChange(t, next(t, a, "start"), map[string]int{"b": 1})
			for i := 0; i < len(bad); i += 2 {
				os.Symlink(bad[i], filepath.Join(dir, bad[i+1]))
			}
			writeFile(t, filepath.Join(dir, "b.yml"), svcJSON("b", 2))
			if u := next(t, a, "a bad entry"); u.Err == nil {
				t.Fatalf("a bad entry: %+v, want an error", u)
			}
			quiet(t, a, "the same bad entry")
			for i := 1; i < len(bad); i += 2 {
				os.Remove(filepath.Join(dir, bad[i]))
			}
			u := next(t, a, "the bad entry gone")
			for u.Err != nil { // a loop removed link by link dangles in between
				u = next(t, a, "the bad entry gone")
			}
			wantChange(t, u, map[string]int{"b": 2})
		})
	}
}

// TestSourceRejectedChangeComesAgain: a change the agent rejects is not the
// base of the next: the next change carries it too.
func TestSourceRejectedChangeComesAgain(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.json"), svcJSON("a", 1))
	writeFile(t, filepath.Join(dir, "b.json"), svcJSON("b", 1))
	var rejectB atomic.Bool // read by the source's goroutine as it publishes
	rejectB.Store(true)
	a := &agent{updates: make(chan source.Update, 8), reject: func(u source.Update) error {
		if rejectB.Load() && slices.Contains(u.Changed, "b") && len(u.Changed) == 1 {
			return errors.New("rejected")
		}
		return nil
	}}
	run(t, New(Config{Path: dir, Interval: 10 * time.Millisecond}), a)
	wantChange(t, next(t, a, "start"), map[string]int{"a": 1, "b": 1})
	writeFile(t, filepath.Join(dir, "b.json"), svcJSON("b", 2))
	wantChange(t, next(t, a, "b changed"), map[string]int{"b": 2})
	quiet(t, a, "the rejected change, unchanged")
	rejectB.Store(false)
	writeFile(t, filepath.Join(dir, "a.json"), svcJSON("a", 2))
	wantChange(t, next(t, a, "a changed after b's rejection"), map[string]int{"a": 2, "b": 2})
}

// TestSourceStartErrors: a first state that cannot be read is Run's error,
// at once: a FIFO (never opened for a read that would block), a directory
// with no topology files (which once crashed the agent), a missing file.
func TestSourceStartErrors(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	writeFile(t, filepath.Join(empty, "README"), "not a topology")
	for path, want := range map[string]string{
		fifo:                          "not a regular file",
		empty:                         "no services",
		filepath.Join(dir, "missing"): "no such file",
	} {
		a := &agent{updates: make(chan source.Update, 1)}
		done := make(chan error, 1)
		go func() { done <- New(Config{Path: path}).Run(context.Background(), a.publish) }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: Run = %v, want an error saying %q", path, err, want)
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("%s: Run blocked for 2s", path)
		}
	}
}

// TestSourceFIFOLater: a FIFO that appears in a watched directory is an
// error published at once, and the source still stops when asked.
func TestSourceFIFOLater(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.json"), svcJSON("a", 1))
	a := &agent{updates: make(chan source.Update, 8)}
	run(t, New(Config{Path: dir, Interval: 10 * time.Millisecond}), a)
	next(t, a, "start")
	if err := syscall.Mkfifo(filepath.Join(dir, "f.json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if u := next(t, a, "a FIFO"); u.Err == nil || !strings.Contains(u.Err.Error(), "not a regular file") {
		t.Fatalf("a FIFO in the directory: %+v, want its error", u)
	}
}

// TestSourceEmbedded: with no path, the example mesh, once, sorted by name.
func TestSourceEmbedded(t *testing.T) {
	a := &agent{updates: make(chan source.Update, 1)}
	run(t, New(Config{}), a)
	u := next(t, a, "start")
	if len(u.Changed) == 0 || !slices.IsSorted(u.Changed) || !u.Whole {
		t.Fatalf("embedded mesh: %+v", u)
	}
	for _, name := range u.Changed {
		if spec, err := u.Services.Spec(name); err != nil || spec.Name != name {
			t.Fatalf("%s: %+v %v", name, spec, err)
		}
	}
	quiet(t, a, "the embedded mesh again")
}

// The update carries the files' nodes (for the tree's warnings: a
// failover from region a node is in is a region sources are in).
func TestSourceUpdateCarriesNodes(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.json"), svcJSON("a", 9001))
	writeFile(t, filepath.Join(dir, "nodes.yaml"), "services: [{name: b, endpoints: []}]\nnodes: [{name: n1, locality: {region: r3}}]\n")
	a := &agent{updates: make(chan source.Update, 4)}
	run(t, New(Config{Path: dir, Interval: 10 * time.Millisecond}), a)
	u := next(t, a, "first state")
	if len(u.Nodes) != 1 || u.Nodes[0].Name != "n1" || u.Nodes[0].Locality["region"] != "r3" {
		t.Fatalf("nodes %+v, want n1 in r3", u.Nodes)
	}
}
