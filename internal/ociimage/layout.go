// Package ociimage packs loctree's two OCI images, with go-containerregistry,
// and writes them as an OCI image layout directory and a tar of it:
//
//   - the agent (agent.go): a multi-platform image index of the static
//     loctree binary with no base image, read back and verified by digest;
//   - the filter (wasm.go): the proxy-wasm module in the Wasm Artifact Image
//     layout Istio's WasmPlugin oci:// URLs accept, read back the way Istio's
//     fetcher extracts the module.
//
// Both go through one layout writer (WriteLayout, ClearLayout), one layout
// reader and one tar writer (WriteTar).
package ociimage

import (
	"fmt"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

const annRefName = "org.opencontainers.image.ref.name"

// WriteLayout writes img, a v1.ImageIndex (AgentIndex) or a v1.Image
// (WasmImage), as a fresh OCI image layout in dir (which must not exist or
// be empty), its entry in the layout's index.json tagged tag, and returns
// img's digest: what to pin (REGISTRY/NAME@DIGEST).
func WriteLayout(img mutate.Appendable, dir, tag string) (v1.Hash, error) {
	idx, isIndex := img.(v1.ImageIndex)
	image, isImage := img.(v1.Image)
	if !isIndex && !isImage {
		return v1.Hash{}, fmt.Errorf("write layout: %T is neither an image nor an image index", img)
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return v1.Hash{}, fmt.Errorf("write layout: %s is not empty", dir)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("write layout: %w", err)
	}
	tagged := layout.WithAnnotations(map[string]string{annRefName: tag})
	if isIndex {
		err = p.AppendIndex(idx, tagged)
	} else {
		err = p.AppendImage(image, tagged)
	}
	if err != nil {
		return v1.Hash{}, fmt.Errorf("write layout: %w", err)
	}
	return img.Digest()
}

// ClearLayout removes dir if it holds an earlier OCI layout, so that a
// rerun can write it again; any other non-empty directory is left alone,
// and WriteLayout refuses it.
func ClearLayout(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, "oci-layout")); err == nil {
		return os.RemoveAll(dir)
	}
	return nil
}

// readLayout opens the OCI layout in dir and returns its index.json as an
// image index, whose entries each image kind checks.
func readLayout(dir string) (v1.ImageIndex, error) {
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("read layout: %w", err)
	}
	return top, nil
}
