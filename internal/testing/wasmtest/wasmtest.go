// Package wasmtest builds Go packages into proxy-wasm modules for tests, the
// way `make wasm` does: the standard Go compiler with GOOS=wasip1
// GOARCH=wasm and -buildmode=c-shared (a WASI reactor).
//
// Each package is compiled at most once per test binary. The compiler's
// output file lives only for the duration of the build; the module is kept
// in memory, so nothing is left on disk when the process ends and callers
// need no TestMain to clean up.
package wasmtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

// module is one package's build, done once.
type module struct {
	once  sync.Once
	bytes []byte
	err   error
}

var (
	mu      sync.Mutex
	modules = map[string]*module{}
)

// Bytes returns the module built from the Go package pkg: a directory
// relative to the working directory such as "../filter" or
// "./testdata/othersdk", or an import path. The slice is the caller's own
// copy. A failed build fails tb with the compiler's output.
func Bytes(tb testing.TB, pkg string) []byte {
	tb.Helper()
	return BytesTags(tb, pkg, "")
}

// BytesTags is Bytes built with the comma-separated build tags (go build
// -tags), such as a test build's debug hooks; "" is Bytes.
func BytesTags(tb testing.TB, pkg, tags string) []byte {
	tb.Helper()
	_, b, err := build(pkg, tags)
	if err != nil {
		tb.Fatal(err)
	}
	return slices.Clone(b)
}

// Build is Bytes written to a file in tb.TempDir(), so it is removed when
// the test ends; it returns the file's path, named after the package
// ("filter.wasm").
func Build(tb testing.TB, pkg string) string {
	tb.Helper()
	key, b, err := build(pkg, "")
	if err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(tb.TempDir(), filepath.Base(key)+".wasm")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		tb.Fatal(err)
	}
	return path
}

// build compiles pkg with tags once per process, keyed by its absolute
// directory (or its import path) and tags, and returns the package's key
// and the shared module bytes.
func build(pkg, tags string) (key string, b []byte, err error) {
	if key, err = resolve(pkg); err != nil {
		return "", nil, err
	}
	mu.Lock()
	m, ok := modules[key+"\x00"+tags]
	if !ok {
		m = &module{}
		modules[key+"\x00"+tags] = m
	}
	mu.Unlock()
	m.once.Do(func() { m.bytes, m.err = compile(key, tags) })
	return key, m.bytes, m.err
}

// resolve makes a relative package directory absolute, so the same package
// named from two working directories is built once; import paths are kept.
func resolve(pkg string) (string, error) {
	if pkg != "." && pkg != ".." && !strings.HasPrefix(pkg, "./") && !strings.HasPrefix(pkg, "../") {
		return pkg, nil
	}
	abs, err := filepath.Abs(pkg)
	if err != nil {
		return "", fmt.Errorf("wasmtest: package %s: %w", pkg, err)
	}
	return abs, nil
}

// compile runs the Go toolchain that built the test binary and reads the
// module back, removing the compiler's output directory before returning.
func compile(pkg, tags string) ([]byte, error) {
	dir, err := os.MkdirTemp("", "loctree-wasmtest")
	if err != nil {
		return nil, fmt.Errorf("wasmtest: %w", err)
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "module.wasm")
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-buildmode=c-shared", "-tags", tags, "-o", out, pkg)
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build %s for wasip1/wasm: %w\n%s", pkg, err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return nil, fmt.Errorf("wasmtest: %w", err)
	}
	return b, nil
}
