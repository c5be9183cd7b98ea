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

// TestRun packs two stand-in binaries twice into the same paths (a rerun
// replaces the layout), and the printed digests are the ones read back.
func TestRun(t *testing.T) {
	tmp := t.TempDir()
	amd, arm := filepath.Join(tmp, "amd64"), filepath.Join(tmp, "arm64")
	os.WriteFile(amd, []byte("amd64 binary"), 0o755)
	os.WriteFile(arm, []byte("arm64 binary"), 0o755)
	dir, tarPath := filepath.Join(tmp, "oci"), filepath.Join(tmp, "oci.tar")
	args := []string{"--binary", "linux/amd64=" + amd, "--binary", "linux/arm64=" + arm, "--dir", dir, "--tar", tarPath, "--tag", "v1"}
	var out bytes.Buffer
	for range 2 {
		out.Reset()
		if err := run(args, &out); err != nil {
			t.Fatal(err)
		}
	}
	v, err := ociimage.ReadAgentLayout(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"index " + v.Digest.String(), fmt.Sprintf("linux/arm64 image %s binary sha256:%x", v.Images["linux/arm64"], sha256.Sum256([]byte("arm64 binary")))} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if st, err := os.Stat(tarPath); err != nil || st.Size() == 0 {
		t.Errorf("tar: %v", err)
	}
	for _, bad := range [][]string{{"--binary", "linux=" + amd}, {"--binary", amd}, {"--binary", "linux/amd64=" + filepath.Join(tmp, "missing")}, {"--dir", dir}} {
		if err := run(bad, &bytes.Buffer{}); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}
