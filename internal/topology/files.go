package topology

import (
	"fmt"
	"hash/maphash"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/loctree/loctree/shared"
)

// Files follows a topology file, or a directory of topology files (each a
// topology document, typically holding one service: the layout a
// config-management tool writes), and reports what changed per service.
// A file is read only when its size, times or inode changed; a service
// whose bytes did not change is not decoded again. Each file obeys
// ReadFile's rules, and the files of a directory count together against
// MaxFileSize.
type Files struct {
	path   string
	docs   map[string]*document // by file path: what was last read
	byHash map[uint64]string    // committed: a service's source hash → its name
	reads  int                  // files read (tests)
	// polled says a Poll has compared the files with the committed state
	// without an error since the last one that failed: until then every
	// Poll compares them, whether or not a file changed since the last, so
	// a change read by a Poll that failed on another file is not lost.
	polled   bool
	reported string // the error the last failed Poll returned
}

// Change is what changed since the last committed Change: services added
// or replaced (named in Names, decoded by Each), and services gone. Commit
// it once it is installed; an uncommitted Change leaves the next one
// computed against the last committed state.
type Change struct {
	Names   []string // services added or replaced, in file order
	Removes []string // sorted
	Nodes   []shared.NodeSpec
	pending []pending
	byName  map[string]int // index in pending
	byHash  map[uint64]string
	files   *Files
}

// pending is a service to decode: a part of a document's content.
type pending struct {
	doc  string
	data []byte
	part *part
	name string
}

// Each decodes the added or replaced services one at a time, in file order,
// and passes each to yield; it stops at the first error (a decoding error
// names the file and line). The specs are not kept.
func (c *Change) Each(yield func(*shared.ServiceSpec) error) error {
	for i := range c.pending {
		spec, err := c.pending[i].decode()
		if err == nil {
			err = yield(spec)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Changed names the services added, replaced or removed, sorted.
func (c *Change) Changed() []string {
	out := slices.Concat(c.Names, c.Removes)
	slices.Sort(out)
	return out
}

// Has reports whether c adds or replaces the service.
func (c *Change) Has(name string) bool {
	_, ok := c.index()[name]
	return ok
}

// Spec decodes a service c adds or replaces; an error names the file and
// line. The spec is not kept: each call decodes it again.
func (c *Change) Spec(name string) (*shared.ServiceSpec, error) {
	i, ok := c.index()[name]
	if !ok {
		return nil, fmt.Errorf("%s: no changed service %q", c.files.path, name)
	}
	return c.pending[i].decode()
}

func (c *Change) index() map[string]int {
	if c.byName == nil {
		c.byName = make(map[string]int, len(c.pending))
		for i, p := range c.pending {
			c.byName[p.name] = i
		}
	}
	return c.byName
}

func (p *pending) decode() (*shared.ServiceSpec, error) {
	spec, err := p.part.decode(p.data, p.doc)
	if err == nil && spec.Name != p.name {
		err = fmt.Errorf("%s: service %q read as %q", p.doc, p.name, spec.Name)
	}
	return spec, err
}

// Services decodes every added or replaced service.
func (c *Change) Services() ([]shared.ServiceSpec, error) {
	var out []shared.ServiceSpec
	err := c.Each(func(s *shared.ServiceSpec) error {
		out = append(out, *s)
		return nil
	})
	return out, err
}

// Commit makes c the base of the next Change.
func (c *Change) Commit() { c.files.byHash = c.byHash }

// NewFiles follows path, a topology file or a directory of them.
func NewFiles(path string) *Files {
	return &Files{path: path, docs: map[string]*document{}, byHash: map[uint64]string{}}
}

// Poll reads the files that changed on disk since the last Poll and returns
// the services that changed against the last committed state: nil when
// nothing changed; an error naming the file (and line) for a file that
// cannot be read or decoded (a directory entry that is a dangling symlink
// or a symlink loop too). The same error is returned once, not by every
// Poll while it lasts; a Poll after it compares every file with the
// committed state again, so what changed meanwhile is reported once the
// error is gone.
func (f *Files) Poll() (*Change, error) {
	ch, err := f.poll()
	if err != nil {
		f.polled = false
		if err.Error() == f.reported {
			return nil, nil
		}
		f.reported = err.Error()
		return nil, err
	}
	f.polled, f.reported = true, ""
	return ch, nil
}

func (f *Files) poll() (*Change, error) {
	paths, err := f.list()
	if err != nil {
		return nil, err
	}
	changed := !f.polled || len(paths) != len(f.docs)
	docs := make([]*document, len(paths))
	data := map[*document][]byte{}
	var total int64
	for i, p := range paths {
		d, buf, fresh, err := f.read(p)
		if err != nil {
			return nil, err
		}
		if total += d.sig.size; total > MaxFileSize {
			return nil, tooLarge(f.path+" (all files)", total, MaxFileSize)
		}
		docs[i], changed = d, changed || fresh
		if buf != nil {
			data[d] = buf
		}
	}
	if len(f.docs) > len(paths) {
		keep := make(map[string]bool, len(paths))
		for _, p := range paths {
			keep[p] = true
		}
		for p := range f.docs {
			if !keep[p] {
				delete(f.docs, p)
			}
		}
	}
	if !changed {
		return nil, nil
	}
	for _, d := range docs {
		if d.err != nil {
			return nil, d.err
		}
		if data[d] == nil && !f.committed(d) {
			buf, ok, err := f.reread(d)
			if err != nil || !ok {
				return nil, err
			}
			data[d] = buf
		}
	}
	ch, err := f.diff(docs, data)
	if err != nil || len(ch.Names)+len(ch.Removes) == 0 && len(f.byHash) > 0 {
		return nil, err
	}
	return ch, nil
}

// list is the files to read: path itself, or the *.json, *.yaml and *.yml
// files of the directory path (not hidden ones), sorted.
func (f *Files) list() ([]string, error) {
	fi, err := os.Stat(f.path)
	if err != nil {
		return nil, fmt.Errorf("read topology: %w", err)
	}
	if !fi.IsDir() {
		return []string{f.path}, nil
	}
	ents, err := os.ReadDir(f.path)
	if err != nil {
		return nil, fmt.Errorf("read topology directory: %w", err)
	}
	var out []string
	for _, e := range ents {
		n := e.Name()
		if ext := filepath.Ext(n); !strings.HasPrefix(n, ".") && (ext == ".json" || ext == ".yaml" || ext == ".yml") {
			out = append(out, filepath.Join(f.path, n))
		}
	}
	return out, nil
}

// read returns the document of path, read again only when the file changed
// or when a cached document holds services that were never committed. fresh
// says it was read now; data is its content then.
func (f *Files) read(path string) (d *document, data []byte, fresh bool, err error) {
	now := time.Now()
	sig, err := stat(path)
	if err != nil {
		return nil, nil, false, err
	}
	if old := f.docs[path]; old != nil && old.sig == sig && !sig.recent(old.readAt) {
		return old, nil, false, nil
	}
	f.reads++
	data, err = ReadFile(path)
	sum := maphash.Bytes(hashSeed, data)
	if old := f.docs[path]; old != nil && err == nil && old.sum == sum {
		old.sig, old.readAt = sig, now // the same content, read again
		return old, data, false, nil
	}
	if err == nil {
		d, err = split(data, path)
	}
	if err != nil {
		d = &document{name: path, err: err}
	}
	d.sig, d.readAt, d.sum = sig, now, sum
	f.docs[path] = d
	return d, data, true, nil
}

// reread reads the content of an unchanged document whose services were
// never committed, when another file's change needs them decoded. It
// reports false when the file changed meanwhile: the next Poll reads it
// as new.
func (f *Files) reread(d *document) ([]byte, bool, error) {
	f.reads++
	data, err := ReadFile(d.name)
	if err != nil {
		return nil, false, err
	}
	if maphash.Bytes(hashSeed, data) != d.sum {
		delete(f.docs, d.name)
		return nil, false, nil
	}
	return data, true, nil
}

// committed reports whether every service of d is in the committed state.
func (f *Files) committed(d *document) bool {
	for _, p := range d.parts {
		if _, ok := f.byHash[p.hash]; !ok {
			return false
		}
	}
	return true
}

// diff decodes the services whose bytes are new and compares the names with
// the committed state.
func (f *Files) diff(docs []*document, data map[*document][]byte) (*Change, error) {
	ch := &Change{byHash: map[uint64]string{}, files: f}
	seen := map[string]bool{}
	for _, d := range docs {
		for i := range d.parts {
			p := &d.parts[i]
			name, ok := f.byHash[p.hash]
			if !ok {
				var err error
				if name, err = p.serviceName(data[d], d.name); err != nil {
					return nil, err
				}
				ch.Names = append(ch.Names, name)
				ch.pending = append(ch.pending, pending{doc: d.name, data: data[d], part: p, name: name})
			}
			if seen[name] {
				return nil, fmt.Errorf("%s: service %q appears twice; give each service one entry", d.name, name)
			}
			seen[name] = true
			ch.byHash[p.hash] = name
		}
		ch.Nodes = append(ch.Nodes, d.nodes...)
	}
	if len(seen) == 0 {
		return nil, fmt.Errorf("%s: no services", f.path)
	}
	if err := checkNodes(&shared.Topology{Nodes: ch.Nodes}); err != nil {
		return nil, fmt.Errorf("%s: %w", f.path, err)
	}
	for _, name := range f.byHash {
		if !seen[name] {
			ch.Removes = append(ch.Removes, name)
		}
	}
	slices.Sort(ch.Removes)
	return ch, nil
}

// fileSig is what says a file changed without reading it.
type fileSig struct {
	size         int64
	mtime, ctime int64 // ns
	ino, dev     uint64
}

func stat(path string) (fileSig, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileSig{}, fmt.Errorf("read topology: %w", err)
	}
	sig := fileSig{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	sysStat(fi, &sig)
	return sig, nil
}

// coarseClock bounds the granularity of file times (the kernel stamps them
// from a clock that ticks every few milliseconds): a write in the same tick
// as an earlier read leaves the times unchanged.
const coarseClock = 50 * time.Millisecond

// recent reports whether a read at readAt may have missed a write stamped
// with the same times; such a file is read again on the next Poll.
func (s fileSig) recent(readAt time.Time) bool {
	return readAt.UnixNano()-max(s.mtime, s.ctime) < int64(coarseClock)
}
