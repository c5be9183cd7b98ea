// Package agentimage packs the static loctree binary as a multi-platform OCI
// image (an image index with one image per platform), with no base image:
// each image is one layer holding only the binary at BinaryPath, whose
// entrypoint it is. It writes the index as an OCI image layout, reads a
// layout back and verifies it, with go-containerregistry.
package agentimage

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// BinaryPath is where the image holds the binary.
const BinaryPath = "usr/local/bin/loctree"

// ErrBadImage is wrapped by every error about an image that is not what
// Index builds.
var ErrBadImage = errors.New("not a loctree agent image")

// Binary is the loctree binary built for one platform.
type Binary struct {
	Platform v1.Platform
	Data     []byte
}

// Index packs binaries, one per platform, as an OCI image index.
func Index(binaries []Binary) (v1.ImageIndex, error) {
	if len(binaries) == 0 {
		return nil, fmt.Errorf("%w: no binary", ErrBadImage)
	}
	var adds []mutate.IndexAddendum
	for _, b := range binaries {
		img, err := Image(b)
		if err != nil {
			return nil, err
		}
		p := b.Platform
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	return mutate.IndexMediaType(mutate.AppendManifests(empty.Index, adds...), types.OCIImageIndex), nil
}

// Image packs one binary as a single-layer OCI image for its platform.
func Image(b Binary) (v1.Image, error) {
	if b.Platform.OS == "" || b.Platform.Architecture == "" || len(b.Data) == 0 {
		return nil, fmt.Errorf("%w: binary for %q: want an OS, an architecture and content", ErrBadImage, b.Platform.String())
	}
	layerTar, err := binaryTar(b.Data)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = b.Platform.OS, b.Platform.Architecture, b.Platform.Variant
	cf.Config.Entrypoint = []string{"/" + BinaryPath}
	cf.Config.Env = []string{"PATH=/usr/local/bin"}
	cf.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	return mutate.ConfigFile(img, cf)
}

// binaryTar is a tar of the binary at BinaryPath (with its directories),
// owned by root, with no times: the same binary gives the same bytes.
func binaryTar(data []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, dir := range []string{"usr/", "usr/local/", "usr/local/bin/"} {
		if err := tw.WriteHeader(&tar.Header{Name: dir, Typeflag: tar.TypeDir, Mode: 0o755, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
	}
	h := &tar.Header{Name: BinaryPath, Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(data)), ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
	if err := tw.WriteHeader(h); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
