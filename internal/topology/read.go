package topology

import (
	"fmt"
	"io"
	"os"
)

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
	f, err := os.OpenFile(path, openFlags, 0)
	if err != nil {
		return nil, fmt.Errorf("read topology: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read topology: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("read topology %s: not a regular file but %s; give the path of a YAML or JSON file", path, kind(fi.Mode()))
	}
	if fi.Size() > limit {
		return nil, tooLarge(path, fi.Size(), limit)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read topology: %w", err)
	}
	if int64(len(data)) > limit {
		return nil, tooLarge(path, int64(len(data)), limit)
	}
	return data, nil
}

func tooLarge(name string, size, limit int64) error {
	return fmt.Errorf("%s: %d bytes or more is over the topology size limit of %d bytes; split the topology or remove unused services", name, size, limit)
}

// kind names a non-regular file type.
func kind(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	case m.IsDir():
		return "a directory"
	}
	return "a special file (" + m.Type().String() + ")"
}
