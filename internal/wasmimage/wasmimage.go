// Package wasmimage packs a proxy-wasm module as an OCI image in the Wasm
// Artifact Image layout that Istio's WasmPlugin oci:// URLs accept (the "oci"
// variant: manifest config and first layer are the runtime config,
// application/vnd.module.wasm.config.v1+json; the second layer is the raw
// module, application/vnd.module.wasm.content.layer.v1+wasm), and writes it as
// an OCI image layout directory and a tar of it, with go-containerregistry.
package wasmimage

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Media types of the Wasm Artifact Image ("oci" variant).
const (
	ConfigMediaType types.MediaType = "application/vnd.module.wasm.config.v1+json"
	LayerMediaType  types.MediaType = "application/vnd.module.wasm.content.layer.v1+wasm"
)

// Annotation keys.
const (
	annTitle   = "org.opencontainers.image.title"
	annRefName = "org.opencontainers.image.ref.name"
)

// Sentinel errors.
var (
	// ErrNotWasm means the module does not start with the wasm magic and version.
	ErrNotWasm = errors.New("not a wasm module")
	// ErrBadImage means an image is not in the layout Istio accepts.
	ErrBadImage = errors.New("not a wasm artifact image")
)

var wasmHeader = []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}

// runtimeConfig is the "oci" variant's config for an Envoy filter.
type runtimeConfig struct {
	Type        string   `json:"type"`
	ABIVersions []string `json:"abiVersions"`
	Config      struct {
		RootIDs []string `json:"rootIds"`
	} `json:"config"`
}

// Image packs module (with root IDs rootIDs) as a wasm artifact image.
func Image(module []byte, rootIDs ...string) (v1.Image, error) {
	if !bytes.HasPrefix(module, wasmHeader) {
		return nil, fmt.Errorf("%w: no \\0asm version 1 header", ErrNotWasm)
	}
	rc := runtimeConfig{Type: "envoy_proxy", ABIVersions: []string{"proxy_abi_version_0_2_1"}}
	rc.Config.RootIDs = append([]string{}, rootIDs...)
	cfg, err := json.Marshal(rc)
	if err != nil {
		return nil, err
	}
	img := &image{config: cfg, layers: []v1.Layer{static.NewLayer(cfg, ConfigMediaType), static.NewLayer(module, LayerMediaType)}}
	if img.manifest, err = img.buildManifest(); err != nil {
		return nil, err
	}
	return partial.CompressedToImage(img)
}

// image is a partial.CompressedImageCore over in-memory blobs.
type image struct {
	config   []byte
	layers   []v1.Layer
	manifest []byte
}

func (i *image) buildManifest() ([]byte, error) {
	cfgHash, cfgSize, err := v1.SHA256(bytes.NewReader(i.config))
	if err != nil {
		return nil, err
	}
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		Config:        v1.Descriptor{MediaType: ConfigMediaType, Size: cfgSize, Digest: cfgHash},
	}
	for n, l := range i.layers {
		d, err := partial.Descriptor(l)
		if err != nil {
			return nil, err
		}
		d.Annotations = map[string]string{annTitle: []string{"runtime-config.json", "plugin.wasm"}[n]}
		m.Layers = append(m.Layers, *d)
	}
	return json.Marshal(m)
}

func (i *image) RawConfigFile() ([]byte, error)      { return i.config, nil }
func (i *image) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
func (i *image) RawManifest() ([]byte, error)        { return i.manifest, nil }
func (i *image) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	for _, l := range i.layers {
		if d, err := l.Digest(); err == nil && d == h {
			return l, nil
		}
	}
	return nil, fmt.Errorf("%w: no blob %s", ErrBadImage, h)
}
