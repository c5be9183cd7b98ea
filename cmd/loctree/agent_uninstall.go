package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/loctree/loctree/loader/kernel"
)

// uninstall runs kernel.Uninstall and prints what it removed: the pins in
// bpffs that were there before and are gone after, and the directory.
func uninstall(w io.Writer, cgroup, bpffs string) error {
	before := dirNames(bpffs)
	_, dirErr := os.Stat(bpffs)
	err := kernel.Uninstall(cgroup, bpffs)
	after := map[string]bool{}
	for _, n := range dirNames(bpffs) {
		after[n] = true
	}
	removed := 0
	for _, n := range before {
		if !after[n] {
			fmt.Fprintf(w, "removed %s\n", filepath.Join(bpffs, n))
			removed++
		}
	}
	if _, statErr := os.Stat(bpffs); dirErr == nil && os.IsNotExist(statErr) {
		fmt.Fprintf(w, "removed %s\n", bpffs)
		removed++
	}
	if removed == 0 && err == nil {
		fmt.Fprintf(w, "nothing to remove under %s\n", bpffs)
	}
	return err
}

func dirNames(dir string) []string {
	entries, _ := os.ReadDir(dir)
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}
