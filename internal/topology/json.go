package topology

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/loctree/loctree/shared"
)

// isJSON reports whether a document is a JSON object: it starts with '{'
// followed by a quoted key or '}' (white space aside). A YAML flow mapping
// with plain keys, "{services: [...]}", stays YAML.
func isJSON(data []byte) bool {
	rest, ok := bytes.CutPrefix(bytes.TrimLeft(data, jsonSpace), []byte("{"))
	rest = bytes.TrimLeft(rest, jsonSpace)
	return ok && len(rest) > 0 && (rest[0] == '"' || rest[0] == '}')
}

const jsonSpace = " \t\r\n"

// parseJSON decodes one JSON object with encoding/json: unknown fields are
// errors, and so is anything after the object.
func parseJSON(data []byte) (*shared.Topology, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var top shared.Topology
	if err := decodeTopology(dec, &top); err != nil {
		if kerr := unknownKeyIn(err, data, 0, topologyType); kerr != nil {
			return nil, kerr
		}
		return nil, jsonError(data, dec, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("line %d: data after the topology's JSON object; a topology is one JSON object", lineAt(data, dec.InputOffset()))
	}
	return &top, nil
}

// decodeTopology decodes the top-level object one service at a time: the
// decoder then buffers one service instead of a copy of the whole document,
// which is most of the memory a big topology costs beyond its own data.
func decodeTopology(dec *json.Decoder, top *shared.Topology) error {
	if err := expectDelim(dec, '{'); err != nil {
		return err
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch key, _ := tok.(string); key {
		case "services":
			err = decodeServices(dec, &top.Services)
		case "nodes":
			err = decodeValue(dec, &top.Nodes, "nodes")
		default:
			err = fmt.Errorf("json: unknown field %q", key)
		}
		if err != nil {
			return err
		}
	}
	return expectDelim(dec, '}')
}

// decodeServices decodes the services list; like encoding/json, a repeated
// key replaces the earlier list.
func decodeServices(dec *json.Decoder, out *[]shared.ServiceSpec) error {
	*out = nil
	tok, err := dec.Token()
	if err != nil || tok == nil { // null: no services
		return err
	}
	if tok != json.Delim('[') {
		return fmt.Errorf("json: services: want a list, not %v", tok)
	}
	for dec.More() {
		var s shared.ServiceSpec
		if err := decodeValue(dec, &s, "services"); err != nil {
			return err
		}
		*out = append(*out, s)
	}
	return expectDelim(dec, ']')
}

// decodeValue decodes the next value into v. A type error's offset is made
// absolute and its field path starts at field.
func decodeValue(dec *json.Decoder, v any, field string) error {
	start := dec.InputOffset()
	err := dec.Decode(v)
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		typ.Offset += start
		typ.Field = strings.TrimSuffix(field+"."+typ.Field, ".")
	}
	return err
}

func expectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err == nil && tok != want {
		err = fmt.Errorf("json: want %v, not %v", want, tok)
	}
	return err
}

// jsonError rewrites a decoding error as one line with the line number.
func jsonError(data []byte, dec *json.Decoder, err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Errorf("line %d: %s", lineAt(data, syn.Offset), syn.Error())
	case errors.As(err, &typ):
		return typeError(lineAt(data, typ.Offset), typ.Field, typ)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return fmt.Errorf("line %d: the JSON document ends early", lineAt(data, int64(len(data))))
	}
	return fmt.Errorf("line %d: %s", lineAt(data, dec.InputOffset()), strings.TrimPrefix(err.Error(), "json: "))
}

// typeError is the error for a value of the wrong type at line, field
// being its path (services.endpoints.weight): for a number that does not
// fit an integer field, numberError.
func typeError(line int, field string, typ *json.UnmarshalTypeError) error {
	if err := jsonNumberError(line, field, typ.Value, typ.Type); err != nil {
		return err
	}
	if hint := numberHints[field[strings.LastIndexByte(field, '.')+1:]]; hint != "" && isInteger(typ.Type) {
		return fmt.Errorf("line %d: %s: cannot use %s as %s (%s)", line, field, typ.Value, typ.Type, hint)
	}
	return fmt.Errorf("line %d: %s: cannot use %s as %s", line, field, typ.Value, typ.Type)
}

// lineAt is the 1-based line of byte offset off.
func lineAt(data []byte, off int64) int {
	off = min(max(off, 0), int64(len(data)))
	return bytes.Count(data[:off], []byte("\n")) + 1
}
