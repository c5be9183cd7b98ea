package tests

import (
	"testing"

	"github.com/loctree/loctree/internal/testing/kerneltest"
)

// TestMain runs the kernel tests in a network namespace of their own.
func TestMain(m *testing.M) { kerneltest.Main(m) }
