package wasmimage

import (
	"fmt"
	"io"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// ReadLayout reads the first image of the OCI layout in dir and extracts the
// module the way Istio's image fetcher does for the "oci" variant: exactly
// two layers, the module being the one of LayerMediaType, its bytes as stored.
// It returns the module and that layer's digest.
func ReadLayout(dir string) ([]byte, v1.Hash, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, v1.Hash{}, fmt.Errorf("read layout: %w", err)
	}
	im, err := idx.IndexManifest()
	if err != nil || len(im.Manifests) == 0 {
		return nil, v1.Hash{}, fmt.Errorf("%w: empty index (%v)", ErrBadImage, err)
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		return nil, v1.Hash{}, fmt.Errorf("read layout: %w", err)
	}
	return Module(img)
}

// Module extracts the module from a wasm artifact image.
func Module(img v1.Image) ([]byte, v1.Hash, error) {
	layers, err := img.Layers()
	if err != nil {
		return nil, v1.Hash{}, fmt.Errorf("%w: %v", ErrBadImage, err)
	}
	if len(layers) != 2 {
		return nil, v1.Hash{}, fmt.Errorf("%w: %d layers (want 2)", ErrBadImage, len(layers))
	}
	for _, l := range layers {
		if mt, err := l.MediaType(); err != nil || mt != LayerMediaType {
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
	return nil, v1.Hash{}, fmt.Errorf("%w: no %s layer", ErrBadImage, LayerMediaType)
}
