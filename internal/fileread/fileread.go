// Package fileread reads configuration files that a user names: only
// regular files, opened non-blocking so that a FIFO at the path is refused
// instead of blocking, and never more than a limit.
package fileread

import (
	"bytes"
	"fmt"
	"io"
	"os"
)

// Regular reads the regular file at path if it holds at most limit bytes.
// what names the file in errors ("topology", "plugin configuration"). A
// FIFO, socket, device or directory is an error at once (the file is opened
// with O_NONBLOCK and checked with fstat), and a file over the limit is
// refused from its size before it is read.
func Regular(path string, limit int64, what string) ([]byte, error) {
	f, err := os.OpenFile(path, openFlags, 0)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("read %s %s: not a regular file but %s; give the path of a file", what, path, kind(fi.Mode()))
	}
	if fi.Size() > limit {
		return nil, TooLarge(what, path, fi.Size(), limit)
	}
	// Sized from fstat: one allocation instead of io.ReadAll's doublings
	// (a 10 MB topology read on every change allocated 22 MB).
	buf := bytes.NewBuffer(make([]byte, 0, fi.Size()+bytes.MinRead))
	if _, err := buf.ReadFrom(io.LimitReader(f, limit+1)); err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	data := buf.Bytes()
	if int64(len(data)) > limit {
		return nil, TooLarge(what, path, int64(len(data)), limit)
	}
	return data, nil
}

// TooLarge is the error for a file of size bytes over limit.
func TooLarge(what, name string, size, limit int64) error {
	return fmt.Errorf("%s %s: %d bytes, over the %s size limit of %d bytes; give a smaller file", what, name, size, what, limit)
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
