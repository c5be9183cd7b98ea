package wasmtest

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var wasmMagic = []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}

// TestBuild: a reactor builds once per process however it is named, Bytes
// hands out private copies and Build writes the module into the test's
// temporary directory.
func TestBuild(t *testing.T) {
	b := Bytes(t, "./testdata/reactor")
	if !bytes.HasPrefix(b, wasmMagic) {
		t.Fatalf("not a wasm module: % x", b[:min(len(b), 8)])
	}
	b[0] = 0xff
	if again := Bytes(t, "./testdata/../testdata/reactor"); again[0] != 0x00 {
		t.Fatal("Bytes returned a slice another caller modified")
	}
	mu.Lock()
	n := len(modules)
	mu.Unlock()
	if n != 1 {
		t.Fatalf("%d builds for one package named two ways, want 1", n)
	}

	path := Build(t, "./testdata/reactor")
	if filepath.Dir(path) == "" || filepath.Base(path) != "reactor.wasm" {
		t.Fatalf("path %s, want .../reactor.wasm", path)
	}
	onDisk, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(onDisk, Bytes(t, "./testdata/reactor")) {
		t.Fatal("the file differs from the module")
	}
}

// TestBuildError: a package that does not compile gives an error carrying
// the compiler's message, and the same error on a second call.
func TestBuildError(t *testing.T) {
	for range 2 {
		_, _, err := build("./testdata/broken", "")
		if err == nil || !strings.Contains(err.Error(), "undefinedOnPurpose") {
			t.Fatalf("err = %v, want the compiler's message naming undefinedOnPurpose", err)
		}
	}
}

// TestBytesTags: build tags reach the compiler, and a tagged build is a
// module of its own beside the untagged one.
func TestBytesTags(t *testing.T) {
	plain, tagged := Bytes(t, "./testdata/reactor"), BytesTags(t, "./testdata/reactor", "wasmtest_tagged")
	if bytes.Contains(plain, []byte("wasmtest_tagged_export")) {
		t.Fatal("the untagged build exports the tagged function")
	}
	if !bytes.Contains(tagged, []byte("wasmtest_tagged_export")) {
		t.Fatal("the tagged build lacks the tagged function: the tags did not reach the compiler")
	}
}
