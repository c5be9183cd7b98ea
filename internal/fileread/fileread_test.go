package fileread

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestRegular(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, []byte("12345"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := Regular(file, 5, "x"); err != nil || string(b) != "12345" {
		t.Fatalf("at the limit: %q %v", b, err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		file:                     "over the x size limit of 4 bytes",
		fifo:                     "named pipe",
		dir:                      "directory",
		"/dev/zero":              "device",
		filepath.Join(dir, "no"): "no such file",
	} {
		if _, err := Regular(path, 4, "x"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", path, err, want)
		}
	}
}
