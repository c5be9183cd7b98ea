package topology

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"strings"
	"time"

	"github.com/loctree/loctree/shared"
)

// document is one topology file cut into its services, each identified by
// a hash of its source bytes, so that a service whose bytes did not change
// is neither decoded nor built again.
type document struct {
	name   string
	parts  []part
	nodes  []shared.NodeSpec
	sig    fileSig
	readAt time.Time
	sum    uint64 // hash of the whole content
	err    error  // the file could not be read or split
}

// part is one service of a document.
type part struct {
	hash       uint64
	start, end int                 // its JSON value: data[start:end]
	spec       *shared.ServiceSpec // already decoded (YAML documents)
}

var hashSeed = maphash.MakeSeed()

// split cuts a topology document into its services. A JSON object is cut
// without decoding the services (a scan of the bytes); a YAML document is
// decoded whole (yaml.v3 has no cheaper way) and each service hashed in its
// JSON form.
func split(data []byte, name string) (*document, error) {
	if len(data) > MaxFileSize {
		return nil, tooLarge(name, int64(len(data)), MaxFileSize)
	}
	if !isJSON(data) {
		return splitYAML(data, name)
	}
	s := &scanner{data: data, name: name}
	d, err := s.document()
	if err != nil {
		return nil, err
	}
	if err := checkNodes(&shared.Topology{Nodes: d.nodes}); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return d, nil
}

func splitYAML(data []byte, name string) (*document, error) {
	top, err := parseYAML(data)
	if errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: empty topology (want a services: list)", name)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %s", name, cleanYAMLError(err))
	}
	if err := checkNodes(top); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	d := &document{name: name, nodes: top.Nodes, parts: make([]part, len(top.Services))}
	for i := range top.Services {
		if err := checkLocalityKeys(&top.Services[i]); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		b, err := json.Marshal(&top.Services[i])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		d.parts[i] = part{hash: maphash.Bytes(hashSeed, b), spec: &top.Services[i]}
	}
	return d, nil
}

// decode decodes a part's service; data is its document's content.
func (p *part) decode(data []byte, name string) (*shared.ServiceSpec, error) {
	if p.spec != nil {
		return p.spec, nil
	}
	dec := json.NewDecoder(bytes.NewReader(data[p.start:p.end]))
	dec.DisallowUnknownFields()
	var s shared.ServiceSpec
	if err := dec.Decode(&s); err != nil {
		if kerr := unknownKeyIn(err, data, p.start, serviceType); kerr != nil {
			return nil, fmt.Errorf("%s: %w", name, kerr)
		}
		return nil, fmt.Errorf("%s: %w", name, partError(data, p.start, err))
	}
	if err := checkLocalityKeys(&s); err != nil {
		return nil, fmt.Errorf("%s: line %d: %w", name, lineAt(data, int64(p.start)), err)
	}
	return &s, nil
}

// serviceName reads the "name" of a part's service without decoding the
// rest (the last "name" key, as encoding/json takes it).
func (p *part) serviceName(data []byte, doc string) (string, error) {
	if p.spec != nil {
		return p.spec.Name, nil
	}
	s := &scanner{data: data[:p.end], pos: p.start, name: doc}
	if err := s.expect('{'); err != nil {
		return "", err
	}
	var name string
	for first := true; s.next() != '}'; first = false {
		if !first {
			if err := s.expect(','); err != nil {
				return "", err
			}
		}
		key, err := s.key()
		if err != nil {
			return "", err
		}
		s.ws()
		start := s.pos
		if err := s.skipValue(); err != nil {
			return "", err
		}
		if key == "name" {
			if err := json.Unmarshal(data[start:s.pos], &name); err != nil {
				return "", s.errorf("services.name: %v", strings.TrimPrefix(err.Error(), "json: "))
			}
		}
	}
	return name, nil
}

// partError is jsonError for a value decoded at offset start of data.
func partError(data []byte, start int, err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Errorf("line %d: %s", lineAt(data, int64(start)+syn.Offset), syn.Error())
	case errors.As(err, &typ):
		return typeError(lineAt(data, int64(start)+typ.Offset), "services."+typ.Field, typ)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return fmt.Errorf("line %d: the JSON document ends early", lineAt(data, int64(start)))
	}
	return fmt.Errorf("line %d: %s", lineAt(data, int64(start)), strings.TrimPrefix(err.Error(), "json: "))
}

// scanner reads the top level of a JSON topology: an object whose
// "services" list it cuts into values without decoding them, and whose
// "nodes" it decodes. A service value is decoded (and so validated) when
// its bytes are new; bytes equal to a service decoded before are valid.
type scanner struct {
	data []byte
	pos  int
	name string
}

func (s *scanner) errorf(format string, args ...any) error {
	return fmt.Errorf("%s: line %d: %s", s.name, lineAt(s.data, int64(s.pos)), fmt.Sprintf(format, args...))
}

func (s *scanner) ws() {
	for s.pos < len(s.data) && (s.data[s.pos] == ' ' || s.data[s.pos] == '\t' || s.data[s.pos] == '\n' || s.data[s.pos] == '\r') {
		s.pos++
	}
}

// next skips white space and returns the next byte, 0 at the end.
func (s *scanner) next() byte {
	s.ws()
	if s.pos >= len(s.data) {
		return 0
	}
	return s.data[s.pos]
}

func (s *scanner) expect(c byte) error {
	switch got := s.next(); {
	case got == c:
		s.pos++
		return nil
	case got == 0:
		return s.errorf("the JSON document ends early")
	default:
		return s.errorf("want %q, not %q", c, got)
	}
}

func (s *scanner) document() (*document, error) {
	d := &document{name: s.name}
	if err := s.expect('{'); err != nil {
		return nil, err
	}
	for first := true; s.next() != '}'; first = false {
		if !first {
			if err := s.expect(','); err != nil {
				return nil, err
			}
		}
		if err := s.field(d); err != nil {
			return nil, err
		}
	}
	s.pos++
	if s.next() != 0 {
		return nil, s.errorf("data after the topology's JSON object; a topology is one JSON object")
	}
	return d, nil
}

// field reads one key and its value.
func (s *scanner) field(d *document) error {
	key, err := s.key()
	if err != nil {
		return err
	}
	switch key {
	case "services":
		return s.services(d)
	case "nodes":
		return s.nodes(d)
	}
	names, _ := structKeys(topologyType, "json")
	return fmt.Errorf("%s: %w", s.name, unknownKey(lineAt(s.data, int64(s.pos)), key, names))
}

// key reads an object key and its colon.
func (s *scanner) key() (string, error) {
	s.ws()
	start := s.pos
	if err := s.skipString(); err != nil {
		return "", err
	}
	var key string
	if err := json.Unmarshal(s.data[start:s.pos], &key); err != nil {
		return "", s.errorf("bad key: %v", err)
	}
	return key, s.expect(':')
}

// services cuts the services list; a repeated key replaces the earlier list,
// whose services are decoded (and so checked) as Parse checks them.
func (s *scanner) services(d *document) error {
	for _, p := range d.parts {
		if _, err := p.decode(s.data, s.name); err != nil {
			return err
		}
	}
	d.parts = nil
	if s.next() == 'n' {
		return s.literal("null")
	}
	if err := s.expect('['); err != nil {
		return s.errorf("services: want a list")
	}
	for first := true; s.next() != ']'; first = false {
		if !first {
			if err := s.expect(','); err != nil {
				return err
			}
		}
		s.ws()
		start := s.pos
		if err := s.skipValue(); err != nil {
			return err
		}
		d.parts = append(d.parts, part{hash: maphash.Bytes(hashSeed, s.data[start:s.pos]), start: start, end: s.pos})
	}
	s.pos++
	return nil
}

func (s *scanner) nodes(d *document) error {
	s.ws()
	from := s.pos
	if err := s.skipValue(); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(s.data[from:s.pos]))
	dec.DisallowUnknownFields()
	d.nodes = nil
	if err := dec.Decode(&d.nodes); err != nil {
		if kerr := unknownKeyIn(err, s.data, from, nodesType); kerr != nil {
			return fmt.Errorf("%s: %w", s.name, kerr)
		}
		return fmt.Errorf("%s: %w", s.name, partError(s.data, from, err))
	}
	return nil
}

func (s *scanner) literal(want string) error {
	if !bytes.HasPrefix(s.data[s.pos:], []byte(want)) {
		return s.errorf("want %s", want)
	}
	s.pos += len(want)
	return nil
}

// skipString moves past a string, escapes included.
func (s *scanner) skipString() error {
	if s.next() != '"' {
		return s.errorf("want a string")
	}
	for i := s.pos + 1; i < len(s.data); i++ {
		switch s.data[i] {
		case '\\':
			i++
		case '"':
			s.pos = i + 1
			return nil
		}
	}
	s.pos = len(s.data)
	return s.errorf("the JSON document ends early")
}

// skipValue moves past one value: a string, an object or list (brackets
// counted, strings skipped), or a literal up to the next delimiter. It
// checks only what it needs to find the end; the value is decoded later.
func (s *scanner) skipValue() error {
	switch s.next() {
	case 0:
		return s.errorf("the JSON document ends early")
	case '"':
		return s.skipString()
	case '{', '[':
		return s.skipNested()
	}
	for s.pos < len(s.data) && bytes.IndexByte([]byte(",]} \t\r\n"), s.data[s.pos]) < 0 {
		s.pos++
	}
	return nil
}

func (s *scanner) skipNested() error {
	depth := 0
	for i := s.pos; i < len(s.data); i++ {
		switch s.data[i] {
		case '"':
			s.pos = i
			if err := s.skipString(); err != nil {
				return err
			}
			i = s.pos - 1
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				s.pos = i + 1
				return nil
			}
		}
	}
	s.pos = len(s.data)
	return s.errorf("the JSON document ends early")
}
