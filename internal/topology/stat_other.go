//go:build !linux

package topology

import "os"

// sysStat has nothing to add beyond size and modification time (Linux adds the rest).
func sysStat(os.FileInfo, *fileSig) {}
