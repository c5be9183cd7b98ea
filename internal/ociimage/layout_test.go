package ociimage

import (
	"archive/tar"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// TestLayoutBytes pins the bytes of both images, as a layout and as a tar,
// on fixed inputs: the digests and tar sums were recorded from
// internal/agentimage and internal/wasmimage before they were folded into
// this package, so the fold (and any later change) keeps what users pin.
func TestLayoutBytes(t *testing.T) {
	agent, err := AgentIndex(binaries())
	if err != nil {
		t.Fatal(err)
	}
	wasm, err := WasmImage(tinyModule, "loctree")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		img         mutate.Appendable
		digest, tar string
	}{
		{"agent", agent, "sha256:3e27ae9e3743aba56f75486ab6aeab378875178c6bd5f3001ac858ea45b55dd8", "79a65e10c1264dfa8fb24eb15db5503b5467908e3fd51f1b4dead477cd187445"},
		{"wasm", wasm, "sha256:a5741431e414eb7143090b164127733310537db9ba80b8b63e3cc3474bacd5c0", "c3ea14ca72ef790cee7a744a4f1347e78d09c04540afbf04e2a96d37b2d0b67a"},
	} {
		dir := filepath.Join(t.TempDir(), "oci")
		digest, err := WriteLayout(tc.img, dir, "0.1.0")
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		tarPath := filepath.Join(t.TempDir(), "oci.tar")
		if err := WriteTar(dir, tarPath); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if sum := fmt.Sprintf("%x", sha256.Sum256(readFile(t, tarPath))); digest.String() != tc.digest || sum != tc.tar {
			t.Errorf("%s: digest %s, tar sha256 %s; want %s, %s", tc.name, digest, sum, tc.digest, tc.tar)
		}
	}
}

// TestClearLayout: a directory holding a layout is removed, any other is
// left for WriteLayout to refuse.
func TestClearLayout(t *testing.T) {
	img, _ := WasmImage(tinyModule)
	dir := filepath.Join(t.TempDir(), "oci")
	if _, err := WriteLayout(img, dir, "t"); err != nil {
		t.Fatal(err)
	}
	if err := ClearLayout(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("a layout directory after ClearLayout: %v", err)
	}
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := ClearLayout(other); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(other, "x")); err != nil {
		t.Errorf("ClearLayout removed a directory that holds no layout: %v", err)
	}
}

func untar(t *testing.T, tarPath string) string {
	t.Helper()
	out := t.TempDir()
	f, err := os.Open(tarPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(out, filepath.FromSlash(h.Name))
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
