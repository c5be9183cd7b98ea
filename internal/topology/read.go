package topology

import "github.com/loctree/loctree/internal/fileread"

// MaxFileSize is the largest topology document accepted, 256 MiB: about
// three million endpoints in JSON. Larger files are refused before they are
// read, so a wrong path (a device, a huge log) cannot exhaust memory.
const MaxFileSize = 256 << 20

// ReadFile reads a topology file of at most MaxFileSize bytes. Only regular
// files are read: the file is opened non-blocking and checked with fstat, so
// a FIFO, socket or device at the path is an error at once instead of a
// read that blocks forever (and a shutdown that waits on it).
func ReadFile(path string) ([]byte, error) {
	return readFile(path, MaxFileSize)
}

func readFile(path string, limit int64) ([]byte, error) {
	return fileread.Regular(path, limit, "topology")
}

func tooLarge(name string, size, limit int64) error {
	return fileread.TooLarge("topology", name, size, limit)
}
