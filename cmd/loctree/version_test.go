package main

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/loctree/loctree/shared"
)

// TestVersion: `loctree version` and `loctree --version` name the module
// version, the VCS revision, the Go version and the tree format version.
func TestVersion(t *testing.T) {
	code, out, errs := runCLI(t, "version")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"loctree ", "revision ", runtime.Version(), fmt.Sprintf("tree format %d", shared.FormatVersion)} {
		if !strings.Contains(out, want) {
			t.Errorf("version output %q lacks %q", out, want)
		}
	}
	code, short, _ := runCLI(t, "--version")
	if code != 0 || short != out {
		t.Errorf("--version: exit %d, %q; want what version prints, %q", code, short, out)
	}
	code, js, _ := runCLI(t, "version", "-o", "json")
	var v versionInfo
	if code != 0 || json.Unmarshal([]byte(js), &v) != nil || v.GoVersion != runtime.Version() || v.FormatVersion != shared.FormatVersion || v.Module == "" {
		t.Errorf("version -o json: exit %d, %q", code, js)
	}
}
