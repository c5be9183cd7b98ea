//go:build unix

package fileread

import (
	"os"
	"syscall"
)

// openFlags open a FIFO without waiting for a writer.
const openFlags = os.O_RDONLY | syscall.O_NONBLOCK
