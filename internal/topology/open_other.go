//go:build !unix

package topology

import "os"

const openFlags = os.O_RDONLY
