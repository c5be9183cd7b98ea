package bpf

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// libHeaders is every header of bpf/lib, by file name.
func libHeaders(t *testing.T) []string {
	t.Helper()
	paths, err := filepath.Glob("lib/*.h")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no headers in bpf/lib (%v)", err)
	}
	names := make([]string, len(paths))
	for i, p := range paths {
		names[i] = filepath.Base(p)
	}
	return names
}

var (
	localInclude = regexp.MustCompile(`^#include "([^"]+)"`)
	guardOpen    = regexp.MustCompile(`(?m)^#ifndef (\S+)\n#define (\S+)\n`)
)

// TestHeadersStandAlone compiles each bpf/lib header as the first and only
// include of an otherwise empty file: a header includes what it uses, so a
// program may include it anywhere, first or not. Needs clang, as make
// generate does.
func TestHeadersStandAlone(t *testing.T) {
	clang, err := exec.LookPath("clang")
	if err != nil {
		t.Skip("clang not found: it compiles the BPF headers (make generate needs it too)")
	}
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range libHeaders(t) {
		t.Run(h, func(t *testing.T) {
			t.Parallel()
			src := filepath.Join(t.TempDir(), "only.c")
			if err := os.WriteFile(src, []byte(`#include "lib/`+h+`"`+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			// The flags of the go:generate line in bpf.go, without code generation.
			cmd := exec.Command(clang, "-target", "bpf", "-O2", "-mcpu=v3", "-Wall", "-Werror", "-fsyntax-only",
				"-I", dir, "-I", filepath.Join(dir, "include"), src)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("lib/%s alone does not compile: %v\n%s", h, err, out)
			}
		})
	}
}

// TestHeadersIncludeOrder checks the shape of every bpf/lib header: an
// include guard named after the file, its includes at the top (none after
// the first declaration), each naming another header of bpf/lib, and no
// include cycle among them.
func TestHeadersIncludeOrder(t *testing.T) {
	headers := libHeaders(t)
	uses := map[string][]string{}
	for _, h := range headers {
		text, err := os.ReadFile(filepath.Join("lib", h))
		if err != nil {
			t.Fatal(err)
		}
		want := "LOCTREE_LIB_" + strings.ToUpper(strings.ReplaceAll(h, ".", "_"))
		if m := guardOpen.FindSubmatch(text); m == nil || string(m[1]) != want || string(m[2]) != want {
			t.Errorf("lib/%s: want the include guard #ifndef %s / #define %s", h, want, want)
		}
		incs, err := topIncludes(string(text))
		if err != nil {
			t.Errorf("lib/%s: %v", h, err)
		}
		for _, inc := range incs {
			if !slices.Contains(headers, inc) {
				t.Errorf("lib/%s includes %q, not a header of bpf/lib", h, inc)
			}
		}
		uses[h] = incs
	}
	reported := map[string]bool{}
	for _, h := range headers {
		cycle := includeCycle(uses, h, nil)
		if cycle == nil {
			continue
		}
		members := slices.Sorted(slices.Values(cycle[1:]))
		if key := strings.Join(members, " "); !reported[key] {
			reported[key] = true
			t.Errorf("include cycle: %s", strings.Join(cycle, " -> "))
		}
	}
}

// TestProgramsIncludeAtTop checks that the programs include bpf/lib
// headers at their top only, never after a declaration.
func TestProgramsIncludeAtTop(t *testing.T) {
	for _, p := range []string{"loctree.c", "tests/lookuptest.c"} {
		text, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := topIncludes(string(text)); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

// topIncludes is the quoted includes of a C file (paths relative to bpf/lib
// for a header's, with a lib/ prefix stripped for a program's); an error
// when one follows a line of code.
func topIncludes(text string) ([]string, error) {
	var incs []string
	code, inComment := 0, false
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case inComment:
			inComment = !strings.Contains(trimmed, "*/")
		case strings.HasPrefix(trimmed, "/*"):
			inComment = !strings.Contains(trimmed, "*/")
		case trimmed == "", strings.HasPrefix(trimmed, "//"), strings.HasPrefix(trimmed, "#") && !strings.HasPrefix(trimmed, "#include"):
		case strings.HasPrefix(trimmed, "#include"):
			if code > 0 {
				return incs, fmt.Errorf("line %d: %s after the code at line %d: includes go at the top", i+1, trimmed, code)
			}
			if m := localInclude.FindStringSubmatch(trimmed); m != nil {
				incs = append(incs, strings.TrimPrefix(m[1], "lib/"))
			}
		default:
			if code == 0 {
				code = i + 1
			}
		}
	}
	return incs, nil
}

// includeCycle is a cycle through h in the include graph uses, reached by
// path, or nil.
func includeCycle(uses map[string][]string, h string, path []string) []string {
	if i := slices.Index(path, h); i >= 0 {
		return append(slices.Clone(path[i:]), h)
	}
	path = append(path, h)
	for _, next := range uses[h] {
		if cycle := includeCycle(uses, next, path); cycle != nil {
			return cycle
		}
	}
	return nil
}
