// Package docs holds tests that keep the documentation true: each checks a
// claim of README.md, RATIONALE.md or a file of docs/ against the code or
// the manifests it describes.
package docs

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/loctree/loctree/internal/testing/wasmtest"
)

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// number finds the number re's first group captures in text.
func number(t *testing.T, file, text string, re *regexp.Regexp) int {
	t.Helper()
	m := re.FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("%s no longer says %s", file, re)
	}
	n, err := strconv.Atoi(strings.ReplaceAll(m[1], ",", ""))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// README's "every fuzz target, N today" counts the fuzz targets as `make
// fuzz` finds them: `func Fuzz...` at the start of a line of a _test.go
// file.
func TestFuzzTargetCount(t *testing.T) {
	said := number(t, "README.md", read(t, "README.md"), regexp.MustCompile(`every fuzz target, (\d+) today`))
	fuzz := regexp.MustCompile(`(?m)^func Fuzz[A-Za-z0-9_]*\(`)
	var found []string
	err := filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != ".." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range fuzz.FindAllString(string(b), -1) {
			found = append(found, path+": "+m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != said {
		t.Errorf("README.md says %d fuzz targets; there are %d:\n%s", said, len(found), strings.Join(found, "\n"))
	}
}

// PERFORMANCE.md's "the embedded example mesh (N services)" is the number
// of services of examples/mesh.yaml, which the CLI embeds.
func TestExampleMeshServiceCount(t *testing.T) {
	said := number(t, "docs/PERFORMANCE.md", read(t, "docs/PERFORMANCE.md"), regexp.MustCompile(`embedded example mesh \((\d+) services\)`))
	var mesh struct {
		Services []any `yaml:"services"`
	}
	if err := yaml.Unmarshal([]byte(read(t, "examples/mesh.yaml")), &mesh); err != nil {
		t.Fatal(err)
	}
	if len(mesh.Services) != said {
		t.Errorf("docs/PERFORMANCE.md says the example mesh has %d services; examples/mesh.yaml has %d", said, len(mesh.Services))
	}
}

// The WasmPlugin of docs/WASM.md is the shipped one (istio/base), shortened:
// the fields it shows have the shipped values, and it adds none.
func TestWasmPluginSnippet(t *testing.T) {
	var doc, shipped map[string]any
	if err := yaml.Unmarshal([]byte(yamlBlock(t, read(t, "docs/WASM.md"), "kind: WasmPlugin")), &doc); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(read(t, "istio/base/wasmplugin.yaml")), &shipped); err != nil {
		t.Fatal(err)
	}
	for _, path := range leaves(doc, "") {
		if path == "spec.url" { // an install input: istio/install sets it
			continue
		}
		want, ok := at(shipped, path)
		if !ok {
			t.Errorf("docs/WASM.md's WasmPlugin has %s, istio/base/wasmplugin.yaml does not", path)
			continue
		}
		if got, _ := at(doc, path); !reflect.DeepEqual(got, want) {
			t.Errorf("docs/WASM.md's WasmPlugin %s = %v, istio/base/wasmplugin.yaml has %v", path, got, want)
		}
	}
	for _, path := range []string{"spec.match", "spec.type", "spec.failStrategy"} {
		if _, ok := at(doc, path); !ok {
			t.Errorf("docs/WASM.md's WasmPlugin leaves out %s, which decides where the filter runs", path)
		}
	}
}

// yamlBlock is the first ```yaml block of md that contains marker.
func yamlBlock(t *testing.T, md, marker string) string {
	t.Helper()
	for _, part := range strings.Split(md, "```yaml\n")[1:] {
		block, _, _ := strings.Cut(part, "```")
		if strings.Contains(block, marker) {
			return block
		}
	}
	t.Fatalf("no yaml block with %q", marker)
	return ""
}

// leaves are the dotted paths of v's scalars and lists.
func leaves(v any, prefix string) []string {
	m, ok := v.(map[string]any)
	if !ok {
		return []string{prefix}
	}
	var out []string
	for k, sub := range m {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		out = append(out, leaves(sub, p)...)
	}
	return out
}

func at(v any, path string) (any, bool) {
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

// Every table of the Markdown docs starts with a header and a separator
// row: rows left after a paragraph, without them, render as text.
func TestMarkdownTablesHaveHeaders(t *testing.T) {
	files, _ := filepath.Glob("../docs/*.md")
	files = append(files, "../README.md", "../RATIONALE.md")
	sep := regexp.MustCompile(`^\|(\s*:?-+:?\s*\|)+\s*$`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		fence := false
		for i, line := range lines {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				fence = !fence
			}
			starts := strings.HasPrefix(line, "|") && (i == 0 || !strings.HasPrefix(lines[i-1], "|"))
			if fence || !starts {
				continue
			}
			if i+1 >= len(lines) || !sep.MatchString(lines[i+1]) {
				t.Errorf("%s:%d: a table without a header and separator row (rows stranded after a paragraph?): %.60s", f, i+1, line)
			}
		}
	}
}

// PERFORMANCE.md's `.wasm` size is that of the filter as `make wasm` builds
// it, within 5 % (the Go toolchain and the filter's code move it).
func TestWasmSize(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the filter")
	}
	said := number(t, "docs/PERFORMANCE.md", read(t, "docs/PERFORMANCE.md"), regexp.MustCompile("ls -l bin/loctree.wasm`: ([0-9,]+) bytes"))
	size := len(wasmtest.Bytes(t, "../filter"))
	if diff := float64(size-said) / float64(said); diff > 0.05 || diff < -0.05 {
		t.Errorf("docs/PERFORMANCE.md says the .wasm is %d bytes; it is %d (%+.1f %%)", said, size, 100*diff)
	}
	t.Logf(".wasm: %d bytes (the doc says %d)", size, said)
}
