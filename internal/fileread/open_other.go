//go:build !unix

package fileread

import "os"

const openFlags = os.O_RDONLY
