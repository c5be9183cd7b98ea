package render

import (
	"encoding/json"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// Formats Write accepts.
const (
	FormatYAML = "yaml"
	FormatJSON = "json"
)

// Write prints objs as a YAML stream ("---" between documents) or as one JSON
// v1 List, both accepted by kubectl apply -f. Empty metadata, spec and status
// left by the Go types' zero values are dropped.
func Write(w io.Writer, objs []runtime.Object, format string) error {
	var docs []map[string]any
	for _, o := range objs {
		m, err := toMap(o)
		if err != nil {
			return err
		}
		docs = append(docs, m)
	}
	switch format {
	case FormatYAML:
		return writeYAML(w, docs)
	case FormatJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"apiVersion": "v1", "kind": "List", "items": docs})
	}
	return fmt.Errorf("%w: output format %q: want %s or %s", ErrOptions, format, FormatYAML, FormatJSON)
}

func writeYAML(w io.Writer, docs []map[string]any) error {
	for i, d := range docs {
		b, err := yaml.Marshal(d)
		if err != nil {
			return fmt.Errorf("encode yaml: %w", err)
		}
		if i > 0 {
			if _, err := io.WriteString(w, "---\n"); err != nil {
				return err
			}
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return nil
}

func toMap(o runtime.Object) (map[string]any, error) {
	b, err := json.Marshal(o)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", o, err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if meta, ok := m["metadata"].(map[string]any); ok && meta["creationTimestamp"] == nil {
		delete(meta, "creationTimestamp")
	}
	for _, k := range []string{"spec", "status"} {
		if isEmpty(m[k]) {
			delete(m, k)
		}
	}
	return m, nil
}

// isEmpty says v is nil or a map whose values are all empty.
func isEmpty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case map[string]any:
		for _, e := range x {
			if !isEmpty(e) {
				return false
			}
		}
		return true
	}
	return false
}
