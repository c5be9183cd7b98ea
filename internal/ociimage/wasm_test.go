package ociimage

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/loctree/loctree/internal/testing/wasmtest"
)

// tinyModule is a valid empty wasm module plus a custom section, so its bytes
// are not only the header.
var tinyModule = append(append([]byte{}, wasmHeader...), 0x00, 0x05, 0x04, 'n', 'a', 'm', 'e')

func TestWasmRoundTripTiny(t *testing.T) { wasmRoundTrip(t, tinyModule) }

// TestWasmRoundTripRealModule packs the real filter, built as `make wasm` does.
func TestWasmRoundTripRealModule(t *testing.T) {
	wasmRoundTrip(t, wasmtest.Bytes(t, "../../filter"))
}

// wasmRoundTrip writes module as a layout and a tar, reads both back the way
// Istio extracts the module, and checks bytes, digests and media types.
func wasmRoundTrip(t *testing.T, module []byte) {
	t.Helper()
	img, err := WasmImage(module, "loctree")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "layout")
	digest, err := WriteLayout(img, dir, "0.1.0")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(module)
	check := func(from string, layoutDir string) {
		got, layerDigest, err := ReadWasmLayout(layoutDir)
		if err != nil {
			t.Fatalf("%s: %v", from, err)
		}
		if !bytes.Equal(got, module) || layerDigest.Hex != hex.EncodeToString(sum[:]) || layerDigest.Algorithm != "sha256" {
			t.Fatalf("%s: module of %d bytes, layer digest %s; want %d bytes, sha256:%x", from, len(got), layerDigest, len(module), sum)
		}
		checkWasmManifest(t, layoutDir, digest.String())
	}
	check("layout", dir)

	tarPath := filepath.Join(t.TempDir(), "image.tar")
	if err := WriteTar(dir, tarPath); err != nil {
		t.Fatal(err)
	}
	check("tar", untar(t, tarPath))
	again := filepath.Join(t.TempDir(), "again.tar")
	if err := WriteTar(dir, again); err != nil {
		t.Fatal(err)
	}
	if a, b := readFile(t, tarPath), readFile(t, again); !bytes.Equal(a, b) {
		t.Error("two tars of the same layout differ")
	}
}

func checkWasmManifest(t *testing.T, dir, digest string) {
	t.Helper()
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	im, _ := idx.IndexManifest()
	if len(im.Manifests) != 1 || im.Manifests[0].Digest.String() != digest || im.Manifests[0].Annotations[annRefName] != "0.1.0" {
		t.Fatalf("index = %+v, want one manifest %s tagged 0.1.0", im.Manifests, digest)
	}
	img, _ := idx.Image(im.Manifests[0].Digest)
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != types.OCIManifestSchema1 || m.Config.MediaType != wasmConfigMediaType ||
		m.Layers[0].MediaType != wasmConfigMediaType || m.Layers[1].MediaType != wasmLayerMediaType {
		t.Errorf("manifest media types: %s, config %s, layers %s %s", m.MediaType, m.Config.MediaType, m.Layers[0].MediaType, m.Layers[1].MediaType)
	}
}

func TestWasmRejects(t *testing.T) {
	if _, err := WasmImage([]byte("#!/bin/sh\n")); !errors.Is(err, ErrNotWasm) {
		t.Errorf("WasmImage(script) err = %v, want ErrNotWasm", err)
	}
	img, _ := WasmImage(tinyModule)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteLayout(img, dir, "t"); err == nil {
		t.Error("WriteLayout into a non-empty directory succeeded")
	}
}
