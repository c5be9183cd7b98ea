package bpftest

import (
	"os"
	"testing"

	"github.com/loctree/loctree/internal/kerneltest"
)

// TestMain runs the kernel tests in a network namespace of their own.
func TestMain(m *testing.M) {
	if code, ran := kerneltest.RunInOwnNetns(); ran {
		os.Exit(code)
	}
	os.Exit(m.Run())
}
