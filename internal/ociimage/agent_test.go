package ociimage

import (
	"archive/tar"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

var (
	amd64 = v1.Platform{OS: "linux", Architecture: "amd64"}
	arm64 = v1.Platform{OS: "linux", Architecture: "arm64"}
)

func binaries() []Binary {
	return []Binary{
		{Platform: amd64, Data: []byte("\x7fELF amd64 stand-in")},
		{Platform: arm64, Data: []byte("\x7fELF arm64 stand-in, another length")},
	}
}

// TestAgentRoundTrip writes the index as a layout and as a tar of it, reads both
// back with go-containerregistry, and checks every digest, each platform's
// binary (by sha256) and the tag; building twice gives the same digest.
func TestAgentRoundTrip(t *testing.T) {
	idx, err := AgentIndex(binaries())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "oci")
	digest, err := WriteLayout(idx, dir, "0.1.0")
	if err != nil {
		t.Fatal(err)
	}
	again, _ := AgentIndex(binaries())
	if d, _ := again.Digest(); d != digest {
		t.Errorf("two builds of the same binaries: digests %s and %s", digest, d)
	}
	tarPath := filepath.Join(t.TempDir(), "oci.tar")
	if err := WriteTar(dir, tarPath); err != nil {
		t.Fatal(err)
	}
	for from, d := range map[string]string{"layout": dir, "tar": untar(t, tarPath)} {
		v, err := ReadAgentLayout(d)
		if err != nil {
			t.Fatalf("%s: %v", from, err)
		}
		if v.Digest != digest || v.Tag != "0.1.0" || len(v.Images) != 2 {
			t.Errorf("%s: digest %s tag %q %d images; want %s, 0.1.0, 2", from, v.Digest, v.Tag, len(v.Images), digest)
		}
		for _, b := range binaries() {
			if v.Sums[b.Platform.String()] != sha256.Sum256(b.Data) {
				t.Errorf("%s: %s: the image does not hold the binary", from, b.Platform)
			}
		}
	}
}

// TestAgentReadRejectsTampering: a layer blob changed after the build is
// found by its digest.
func TestAgentReadRejectsTampering(t *testing.T) {
	idx, err := AgentIndex(binaries())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "oci")
	if _, err := WriteLayout(idx, dir, "t"); err != nil {
		t.Fatal(err)
	}
	img, _ := idx.Image(mustManifest(t, idx))
	layers, _ := img.Layers()
	ld, _ := layers[0].Digest()
	blob := filepath.Join(dir, "blobs", ld.Algorithm, ld.Hex)
	data, err := os.ReadFile(blob)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(blob, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadAgentLayout(dir); !errors.Is(err, ErrBadAgentImage) || !strings.Contains(err.Error(), "the manifest says "+ld.String()) {
		t.Fatalf("a changed layer blob: err = %v, want its digest mismatch", err)
	}
}

func mustManifest(t *testing.T, idx v1.ImageIndex) v1.Hash {
	t.Helper()
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	return im.Manifests[0].Digest
}

func TestAgentRejects(t *testing.T) {
	for name, bs := range map[string][]Binary{
		"none":        nil,
		"no platform": {{Data: []byte("x")}},
		"empty":       {{Platform: amd64}},
	} {
		if _, err := AgentIndex(bs); !errors.Is(err, ErrBadAgentImage) {
			t.Errorf("%s: err = %v, want ErrBadAgentImage", name, err)
		}
	}
	idx, _ := AgentIndex(binaries())
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteLayout(idx, dir, "t"); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("WriteLayout into a non-empty directory: %v", err)
	}
}

// TestBuiltAgentImage checks the layout `make image` wrote, when it is there:
// both platforms, each image's binary equal (by sha256) to the one built
// for it, and the linux/amd64 binary, taken out of the image, runs here.
func TestBuiltAgentImage(t *testing.T) {
	dir := "../../bin/loctree-oci"
	if _, err := os.Stat(filepath.Join(dir, "oci-layout")); err != nil {
		t.Skip("no bin/loctree-oci: run make image")
	}
	v, err := ReadAgentLayout(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"linux/amd64", "linux/arm64"} {
		bin, err := os.ReadFile("../../bin/loctree-" + strings.ReplaceAll(p, "/", "-"))
		if err != nil {
			t.Fatal(err)
		}
		if v.Sums[p] != sha256.Sum256(bin) {
			t.Errorf("%s: the image's binary is not bin/loctree-%s (rerun make image)", p, strings.ReplaceAll(p, "/", "-"))
		}
	}
	if runtime.GOARCH != "amd64" {
		return
	}
	exe := filepath.Join(t.TempDir(), "loctree")
	if err := os.WriteFile(exe, extract(t, dir, "linux/amd64"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(exe, "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "loctree") {
		t.Fatalf("the binary from the image: %v\n%s", err, out)
	}
}

// extract returns the binary of platform's image in the layout at dir.
func extract(t *testing.T, dir, platform string) []byte {
	t.Helper()
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	tm, _ := top.IndexManifest()
	idx, err := top.ImageIndex(tm.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, _ := idx.IndexManifest()
	for _, d := range im.Manifests {
		if d.Platform.String() != platform {
			continue
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		layers, _ := img.Layers()
		rc, err := layers[0].Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err != nil {
				t.Fatal(err)
			}
			if h.Name == agentBinaryPath {
				b, err := io.ReadAll(tr)
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
		}
	}
	t.Fatalf("no %s image", platform)
	return nil
}
