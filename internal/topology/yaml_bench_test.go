package topology

import (
	"bytes"
	"fmt"
	"testing"

	yamlv2 "go.yaml.in/yaml/v2"
	yamlv3org "go.yaml.in/yaml/v3"
	yamlv3 "gopkg.in/yaml.v3"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/loctree/loctree/shared"
)

// BenchmarkYAMLDecoders decodes the same YAML topology (services × 100
// endpoints, as yaml.v3 writes it) with the YAML libraries at hand: what
// Parse does today (gopkg.in/yaml.v3, a node tree then a strict decode),
// one strict decode of gopkg.in/yaml.v3 and of its maintained successor
// go.yaml.in/yaml/v3, go.yaml.in/yaml/v2, and sigs.k8s.io/yaml (YAML → JSON
// → encoding/json, what Kubernetes uses); next to the same topology as JSON
// through Parse.
func BenchmarkYAMLDecoders(b *testing.B) {
	for _, services := range []int{100, 1000} {
		v := make([]int, services)
		js := scaleDoc(services, v)
		top, err := Parse(js, "t.json")
		if err != nil {
			b.Fatal(err)
		}
		doc, err := yamlv3.Marshal(top)
		if err != nil {
			b.Fatal(err)
		}
		decoders := []struct {
			name   string
			decode func([]byte) error
		}{
			{"Parse/yaml", func(d []byte) error { _, err := Parse(d, "t.yaml"); return err }},
			{"gopkg.in-yaml.v3", func(d []byte) error {
				dec := yamlv3.NewDecoder(bytes.NewReader(d))
				dec.KnownFields(true)
				var t shared.Topology
				return dec.Decode(&t)
			}},
			{"go.yaml.in-yaml-v3", func(d []byte) error {
				dec := yamlv3org.NewDecoder(bytes.NewReader(d))
				dec.KnownFields(true)
				var t shared.Topology
				return dec.Decode(&t)
			}},
			{"go.yaml.in-yaml-v2", func(d []byte) error { var t shared.Topology; return yamlv2.UnmarshalStrict(d, &t) }},
			{"sigs.k8s.io-yaml", func(d []byte) error { var t shared.Topology; return sigsyaml.UnmarshalStrict(d, &t) }},
		}
		for _, d := range decoders {
			b.Run(fmt.Sprintf("S=%d/%s", services, d.name), func(b *testing.B) {
				b.SetBytes(int64(len(doc)))
				for b.Loop() {
					if err := d.decode(doc); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		b.Run(fmt.Sprintf("S=%d/Parse/json", services), func(b *testing.B) {
			b.SetBytes(int64(len(js)))
			for b.Loop() {
				if _, err := Parse(js, "t.json"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
