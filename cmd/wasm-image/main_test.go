package main

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loctree/loctree/internal/ociimage"
)

// TestRun packs a module twice into the same paths (a rerun replaces the
// layout) and reads the module back from the layout.
func TestRun(t *testing.T) {
	tmp := t.TempDir()
	module := append([]byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}, []byte("\x00\x03\x02hi")...)
	mod := filepath.Join(tmp, "m.wasm")
	if err := os.WriteFile(mod, module, 0o644); err != nil {
		t.Fatal(err)
	}
	dir, tarPath := filepath.Join(tmp, "oci"), filepath.Join(tmp, "oci.tar")
	for range 2 {
		var out bytes.Buffer
		if err := run([]string{"--module", mod, "--dir", dir, "--tar", tarPath, "--tag", "v1"}, &out); err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("module layer sha256:%x", sha256.Sum256(module)); !strings.Contains(out.String(), want) {
			t.Errorf("output %q lacks %q", out.String(), want)
		}
	}
	got, _, err := ociimage.ReadWasmLayout(dir)
	if err != nil || !bytes.Equal(got, module) {
		t.Fatalf("read back %d bytes, %v", len(got), err)
	}
	if st, err := os.Stat(tarPath); err != nil || st.Size() == 0 {
		t.Errorf("tar: %v", err)
	}
	if err := run([]string{"--module", filepath.Join(tmp, "missing.wasm"), "--dir", dir}, &bytes.Buffer{}); err == nil {
		t.Error("a missing module did not fail")
	}
}
