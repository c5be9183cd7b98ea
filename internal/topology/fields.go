package topology

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/loctree/loctree/shared"
)

// A key the model does not have is refused (yaml.v3 KnownFields,
// encoding/json DisallowUnknownFields); their errors name the Go type
// ("field polcy not found in type shared.ServiceSpec"). The functions here
// find that key again, with its line, and name the nearest key of the
// same object: "line 3: unknown key polcy (did you mean policy?)".

var (
	topologyType = reflect.TypeFor[shared.Topology]()
	serviceType  = reflect.TypeFor[shared.ServiceSpec]()
	nodesType    = reflect.TypeFor[[]shared.NodeSpec]()
)

// structKeys are the keys of struct type t in the format tag ("json" or
// "yaml"), in field order, with their field types.
func structKeys(t reflect.Type, tag string) (names []string, types map[string]reflect.Type) {
	types = map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get(tag), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		names = append(names, name)
		types[name] = f.Type
	}
	return names, types
}

// unknownKey is the error for key, not one of the keys of an object.
func unknownKey(line int, key string, keys []string) error {
	best, bestD := "", len(key)/2+1
	for _, k := range keys {
		if d := EditDistance(key, k); d < bestD {
			best, bestD = k, d
		}
	}
	if best != "" {
		return fmt.Errorf("line %d: unknown key %s (did you mean %s?)", line, key, best)
	}
	return fmt.Errorf("line %d: unknown key %s (the keys here: %s)", line, key, strings.Join(keys, ", "))
}

// elem is t without pointers.
func elem(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// checkYAMLKeys walks a YAML node (the value of key, "" at the top)
// against type t and fails on the first key that t does not have, and on
// the first number that does not fit its integer field (checkYAMLNumber),
// with its line. Values of another wrong kind are left to the decoder.
func checkYAMLKeys(n *yaml.Node, t reflect.Type, key string) error {
	n, t = deref(n), elem(t)
	if n == nil {
		return nil
	}
	switch {
	case t.Kind() == reflect.Struct && n.Kind == yaml.MappingNode:
		names, types := structKeys(t, "yaml")
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			ft, ok := types[k.Value]
			if !ok {
				return unknownKey(k.Line, k.Value, names)
			}
			if err := checkYAMLKeys(n.Content[i+1], ft, k.Value); err != nil {
				return err
			}
		}
	case t.Kind() == reflect.Map && n.Kind == yaml.MappingNode:
		for i := 1; i < len(n.Content); i += 2 {
			if err := checkYAMLKeys(n.Content[i], t.Elem(), key); err != nil {
				return err
			}
		}
	case t.Kind() == reflect.Slice && n.Kind == yaml.SequenceNode:
		for _, it := range n.Content {
			if err := checkYAMLKeys(it, t.Elem(), key); err != nil {
				return err
			}
		}
	default:
		return checkYAMLNumber(n, t, key)
	}
	return nil
}

// findJSONKey looks again, after the decoder refused an unknown field, for
// the first key of data[start:] (one JSON value, read as type t) that t
// does not have, and returns its error with the line; nil if there is none
// (or the value does not read).
func findJSONKey(data []byte, start int, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(data[start:]))
	w := &jsonWalk{dec: dec, data: data, start: start}
	err := w.value(t)
	if k, ok := err.(*keyError); ok {
		return k.err
	}
	return nil
}

type jsonWalk struct {
	dec   *json.Decoder
	data  []byte
	start int
}

// keyError carries the unknown key's error out of the walk, apart from
// the walk's own reading errors.
type keyError struct{ err error }

func (k *keyError) Error() string { return k.err.Error() }

func (w *jsonWalk) value(t reflect.Type) error {
	t = elem(t)
	tok, err := w.dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		return w.object(t)
	case json.Delim('['):
		for w.dec.More() {
			var et reflect.Type = reflect.TypeFor[any]()
			if t.Kind() == reflect.Slice {
				et = t.Elem()
			}
			if err := w.value(et); err != nil {
				return err
			}
		}
		_, err = w.dec.Token()
	}
	return err
}

func (w *jsonWalk) object(t reflect.Type) error {
	var names []string
	var types map[string]reflect.Type
	if t.Kind() == reflect.Struct {
		names, types = structKeys(t, "json")
	}
	for w.dec.More() {
		tok, err := w.dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		ft := reflect.TypeFor[any]()
		if t.Kind() == reflect.Struct {
			var ok bool
			if ft, ok = types[key]; !ok {
				line := lineAt(w.data, int64(w.start)+w.dec.InputOffset())
				return &keyError{unknownKey(line, key, names)}
			}
		} else if t.Kind() == reflect.Map {
			ft = t.Elem()
		}
		if err := w.value(ft); err != nil {
			return err
		}
	}
	_, err := w.dec.Token()
	return err
}

// unknownKeyIn is, when err is encoding/json's refusal of an unknown field
// in data[start:] (read as type t), the error naming that key with its
// line; nil otherwise.
func unknownKeyIn(err error, data []byte, start int, t reflect.Type) error {
	if err == nil || !strings.Contains(err.Error(), "unknown field") {
		return nil
	}
	return findJSONKey(data, start, t)
}
