package ociimage

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The filter image: a proxy-wasm module in the Wasm Artifact Image layout
// that Istio's WasmPlugin oci:// URLs accept (the "oci" variant: manifest
// config and first layer are the runtime config,
// application/vnd.module.wasm.config.v1+json; the second layer is the raw
// module, application/vnd.module.wasm.content.layer.v1+wasm).

// Media types of the Wasm Artifact Image ("oci" variant).
const (
	wasmConfigMediaType types.MediaType = "application/vnd.module.wasm.config.v1+json"
	wasmLayerMediaType  types.MediaType = "application/vnd.module.wasm.content.layer.v1+wasm"
)

const annTitle = "org.opencontainers.image.title"

var wasmHeader = []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}

// runtimeConfig is the "oci" variant's config for an Envoy filter.
type runtimeConfig struct {
	Type        string   `json:"type"`
	ABIVersions []string `json:"abiVersions"`
	Config      struct {
		RootIDs []string `json:"rootIds"`
	} `json:"config"`
}

// WasmImage packs module (with root IDs rootIDs) as a wasm artifact image.
// A module without the wasm header is ErrNotWasm.
func WasmImage(module []byte, rootIDs ...string) (v1.Image, error) {
	if !bytes.HasPrefix(module, wasmHeader) {
		return nil, fmt.Errorf("%w: no \\0asm version 1 header", ErrNotWasm)
	}
	rc := runtimeConfig{Type: "envoy_proxy", ABIVersions: []string{"proxy_abi_version_0_2_1"}}
	rc.Config.RootIDs = append([]string{}, rootIDs...)
	cfg, err := json.Marshal(rc)
	if err != nil {
		return nil, err
	}
	img := &wasmImage{config: cfg, layers: []v1.Layer{static.NewLayer(cfg, wasmConfigMediaType), static.NewLayer(module, wasmLayerMediaType)}}
	if img.manifest, err = img.buildManifest(); err != nil {
		return nil, err
	}
	return partial.CompressedToImage(img)
}

// wasmImage is a partial.CompressedImageCore over in-memory blobs.
type wasmImage struct {
	config   []byte
	layers   []v1.Layer
	manifest []byte
}

func (i *wasmImage) buildManifest() ([]byte, error) {
	cfgHash, cfgSize, err := v1.SHA256(bytes.NewReader(i.config))
	if err != nil {
		return nil, err
	}
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		Config:        v1.Descriptor{MediaType: wasmConfigMediaType, Size: cfgSize, Digest: cfgHash},
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

func (i *wasmImage) RawConfigFile() ([]byte, error)      { return i.config, nil }
func (i *wasmImage) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
func (i *wasmImage) RawManifest() ([]byte, error)        { return i.manifest, nil }
func (i *wasmImage) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	for _, l := range i.layers {
		if d, err := l.Digest(); err == nil && d == h {
			return l, nil
		}
	}
	return nil, fmt.Errorf("%w: no blob %s", ErrBadWasmImage, h)
}

// ReadWasmLayout reads the first image of the OCI layout in dir and
// extracts the module the way Istio's image fetcher does for the "oci"
// variant: exactly two layers, the module being the one of the
// …content.layer.v1+wasm media type, its bytes as stored. It returns the
// module and that layer's digest. Errors about the content wrap
// ErrBadWasmImage.
func ReadWasmLayout(dir string) ([]byte, v1.Hash, error) {
	idx, err := readLayout(dir)
	if err != nil {
		return nil, v1.Hash{}, err
	}
	im, err := idx.IndexManifest()
	if err != nil || len(im.Manifests) == 0 {
		return nil, v1.Hash{}, fmt.Errorf("%w: empty index (%v)", ErrBadWasmImage, err)
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		return nil, v1.Hash{}, fmt.Errorf("read layout: %w", err)
	}
	return wasmModule(img)
}

// wasmModule extracts the module from a wasm artifact image.
func wasmModule(img v1.Image) ([]byte, v1.Hash, error) {
	layers, err := img.Layers()
	if err != nil {
		return nil, v1.Hash{}, fmt.Errorf("%w: %v", ErrBadWasmImage, err)
	}
	if len(layers) != 2 {
		return nil, v1.Hash{}, fmt.Errorf("%w: %d layers (want 2)", ErrBadWasmImage, len(layers))
	}
	for _, l := range layers {
		if mt, err := l.MediaType(); err != nil || mt != wasmLayerMediaType {
			continue
		}
		d, err := l.Digest()
		if err != nil {
			return nil, v1.Hash{}, err
		}
		rc, err := l.Compressed()
		if err != nil {
			return nil, v1.Hash{}, err
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		return b, d, err
	}
	return nil, v1.Hash{}, fmt.Errorf("%w: no %s layer", ErrBadWasmImage, wasmLayerMediaType)
}
