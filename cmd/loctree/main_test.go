package main

import (
	"os"
	"testing"
)

// TestMain lets the test binary run as `loctree` in a child process, so the
// agent can be killed with SIGKILL like a real one, and removes the wasm
// modules the tests built.
func TestMain(m *testing.M) {
	if os.Getenv("LOCTREE_TEST_MAIN") == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	code := m.Run()
	removeModules()
	os.Exit(code)
}
