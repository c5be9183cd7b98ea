package main

import (
	"fmt"
	"os"
	"testing"

	"github.com/loctree/loctree/internal/testing/kerneltest"
)

// TestMain lets the test binary run as `loctree` in a child process, so the
// agent can be killed with SIGKILL like a real one, runs the tests in a
// network namespace of their own, and gives the tests' CLI runs one wasm
// compilation cache, removed at the end.
func TestMain(m *testing.M) {
	if os.Getenv("LOCTREE_TEST_MAIN") == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	if code, ran := kerneltest.RunInOwnNetns(); ran {
		os.Exit(code)
	}
	dir, err := os.MkdirTemp("", "loctree-cmd-wasm")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	compileCache = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
