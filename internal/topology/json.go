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
	if err := dec.Decode(&top); err != nil {
		return nil, jsonError(data, dec, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("line %d: data after the topology's JSON object; a topology is one JSON object", lineAt(data, dec.InputOffset()))
	}
	return &top, nil
}

// jsonError rewrites a decoding error as one line with the line number.
func jsonError(data []byte, dec *json.Decoder, err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Errorf("line %d: %s", lineAt(data, syn.Offset), syn.Error())
	case errors.As(err, &typ):
		return fmt.Errorf("line %d: %s: cannot use %s as %s%s", lineAt(data, typ.Offset), typ.Field, typ.Value, typ.Type, weightHint(typ.Field))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("line %d: the JSON document ends early", lineAt(data, int64(len(data))))
	}
	return fmt.Errorf("line %d: %s", lineAt(data, dec.InputOffset()), strings.TrimPrefix(err.Error(), "json: "))
}

func weightHint(field string) string {
	if strings.HasSuffix(field, ".weight") {
		return " (weights are whole numbers, 0 to 4294967295)"
	}
	return ""
}

// lineAt is the 1-based line of byte offset off.
func lineAt(data []byte, off int64) int {
	off = min(max(off, 0), int64(len(data)))
	return bytes.Count(data[:off], []byte("\n")) + 1
}
