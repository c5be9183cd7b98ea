// Package examples holds the example topology that loctree embeds as its default.
package examples

import _ "embed"

// Mesh is examples/mesh.yaml: three regions, several zones and subzones, a few
// services, every address in 127.0.0.0/8.
//
//go:embed mesh.yaml
var Mesh []byte
