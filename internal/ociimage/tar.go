package ociimage

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// WriteTar writes the layout directory dir as a tar (the oci-archive format:
// oci-layout, index.json and blobs/ at the archive root). Entries are sorted
// and carry no owner or time, so the same layout gives the same bytes.
func WriteTar(dir, tarPath string) (err error) {
	f, err := os.Create(tarPath)
	if err != nil {
		return fmt.Errorf("write tar: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("write tar: %w", cerr)
		}
	}()
	tw := tar.NewWriter(f)
	paths, err := layoutPaths(dir)
	if err != nil {
		return err
	}
	for _, p := range paths {
		if err := addFile(tw, dir, p); err != nil {
			return fmt.Errorf("write tar: %w", err)
		}
	}
	return tw.Close()
}

func layoutPaths(dir string) ([]string, error) {
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		paths = append(paths, filepath.ToSlash(rel))
		return err
	})
	slices.Sort(paths)
	return paths, err
}

func addFile(tw *tar.Writer, dir, rel string) error {
	fi, err := os.Stat(filepath.Join(dir, rel))
	if err != nil {
		return err
	}
	h := &tar.Header{Name: rel, Mode: 0o644, ModTime: time.Unix(0, 0), Format: tar.FormatPAX, Typeflag: tar.TypeReg, Size: fi.Size()}
	if fi.IsDir() {
		h.Name, h.Mode, h.Typeflag, h.Size = rel+"/", 0o755, tar.TypeDir, 0
	}
	if err := tw.WriteHeader(h); err != nil || fi.IsDir() {
		return err
	}
	f, err := os.Open(filepath.Join(dir, rel))
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(tw, f)
	return err
}
