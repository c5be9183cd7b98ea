// Package topology reads loctree topology files (YAML or JSON) into the
// shared model, with errors that name the file and line.
package topology

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/loctree/loctree/examples"
	"github.com/loctree/loctree/shared"
)

// DefaultName is how the embedded default topology is named in messages.
const DefaultName = "examples/mesh.yaml (embedded)"

// Load reads a topology file (see ReadFile): YAML, or one JSON object; or
// a directory of them, read as the agent follows it (Files): its *.json,
// *.yaml and *.yml files, each service once across them.
func Load(path string) (*shared.Topology, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return loadDir(path)
	}
	data, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(data, path)
}

// loadDir reads a directory of topology files through Files, so that what
// it accepts is what the agent's file source installs.
func loadDir(path string) (*shared.Topology, error) {
	ch, err := NewFiles(path).Poll()
	if err != nil {
		return nil, err
	}
	if ch == nil {
		return nil, fmt.Errorf("%s: no topology files (*.json, *.yaml, *.yml) in the directory", path)
	}
	svcs, err := ch.Services()
	if err != nil {
		return nil, err
	}
	return &shared.Topology{Services: svcs, Nodes: ch.Nodes}, nil
}

// Default returns the embedded example topology.
func Default() *shared.Topology {
	top, err := Parse(examples.Mesh, DefaultName)
	if err != nil {
		panic("embedded topology is invalid: " + err.Error())
	}
	return top
}

// LoadOrDefault loads path, or returns the default topology when path is "".
func LoadOrDefault(path string) (*shared.Topology, string, error) {
	if path == "" {
		return Default(), DefaultName, nil
	}
	top, err := Load(path)
	return top, path, err
}

// Parse decodes a topology document: one JSON object (decoded as JSON) or
// one YAML document. Unknown fields, a second document, data after the JSON
// object and fractional weights are errors, so nothing in the file is
// ignored silently. name is used in errors.
func Parse(data []byte, name string) (*shared.Topology, error) {
	if len(data) > MaxFileSize {
		return nil, tooLarge(name, int64(len(data)), MaxFileSize)
	}
	top, err := decode(data)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: empty topology (want a services: list)", name)
		}
		return nil, fmt.Errorf("%s: %s", name, cleanYAMLError(err))
	}
	if len(top.Services) == 0 {
		return nil, fmt.Errorf("%s: no services", name)
	}
	if err := checkNodes(top); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	for i := range top.Services {
		if err := checkLocalityKeys(&top.Services[i]); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	return top, nil
}

func decode(data []byte) (*shared.Topology, error) {
	if isJSON(data) {
		return parseJSON(data)
	}
	return parseYAML(data)
}

func checkNodes(top *shared.Topology) error {
	seen := map[string]bool{}
	for _, n := range top.Nodes {
		if n.Name == "" || seen[n.Name] {
			return fmt.Errorf("node %q: empty or repeated node name", n.Name)
		}
		seen[n.Name] = true
	}
	return nil
}

// cleanYAMLError turns "yaml: unmarshal errors:\n  line 3: ..." into one line.
func cleanYAMLError(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	msg = strings.TrimPrefix(msg, "unmarshal errors:\n")
	lines := strings.Split(msg, "\n")
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	return strings.Join(lines, "; ")
}

// NodeLocality returns the locality of the named node of the topology.
func NodeLocality(top *shared.Topology, name string) (shared.Locality, error) {
	names := make([]string, 0, len(top.Nodes))
	for _, n := range top.Nodes {
		if n.Name == name {
			return n.Locality, nil
		}
		names = append(names, n.Name)
	}
	return nil, fmt.Errorf("unknown node %q (the topology has %s)", name, strings.Join(names, ", "))
}
