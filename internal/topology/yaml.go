package topology

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"gopkg.in/yaml.v3"

	"github.com/loctree/loctree/shared"
)

// parseYAML decodes exactly one YAML document. It reads the document twice:
// once as a node tree, to refuse a second document, numbers that do not fit
// their integer field (yaml.v3 truncates 1.4 to 1 when it decodes into an
// integer) and unknown keys (named with the nearest known one), then into
// the model.
func parseYAML(data []byte) (*shared.Topology, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	if err := checkSingleDocument(dec); err != nil {
		return nil, err
	}
	if err := checkYAMLKeys(root(&doc), topologyType, ""); err != nil {
		return nil, err
	}
	strict := yaml.NewDecoder(bytes.NewReader(data))
	strict.KnownFields(true)
	var top shared.Topology
	if err := strict.Decode(&top); err != nil {
		return nil, err
	}
	return &top, nil
}

// checkSingleDocument fails when the stream holds another, non-empty
// document: its services would otherwise be ignored silently.
func checkSingleDocument(dec *yaml.Decoder) error {
	var next yaml.Node
	err := dec.Decode(&next)
	switch {
	case errors.Is(err, io.EOF):
		return nil
	case err != nil:
		return err
	case isEmpty(&next):
		return nil
	}
	return fmt.Errorf("line %d: a second YAML document; a topology is one document (remove the \"---\" or merge the services)", next.Line)
}

// isEmpty reports whether a document holds nothing (a lone "---").
func isEmpty(doc *yaml.Node) bool {
	r := root(doc)
	return r == doc && len(doc.Content) == 0 || r.Kind == yaml.ScalarNode && r.ShortTag() == "!!null" && r.Value == ""
}

func root(doc *yaml.Node) *yaml.Node {
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		return doc.Content[0]
	}
	return doc
}

// mapValue is the value of key in mapping m (aliases resolved), or nil.
func mapValue(m *yaml.Node, key string) *yaml.Node {
	m = deref(m)
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return deref(m.Content[i+1])
		}
	}
	return nil
}

// items are the elements of sequence s, or nil.
func items(s *yaml.Node) []*yaml.Node {
	if s == nil || s.Kind != yaml.SequenceNode {
		return nil
	}
	return s.Content
}

func deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}
