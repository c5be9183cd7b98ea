package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/loctree/loctree/internal/topology"
	"github.com/loctree/loctree/shared"
)

// treeInput is what `tree pick` and `tree inspect` read: a topology file or
// directory (built here, generation 1) or an encoded tree, told apart by the tree's
// magic; "" is the embedded example mesh.
type treeInput struct {
	name     string
	top      *shared.Topology // nil when the input is an encoded tree
	tree     *shared.Tree
	warnings []shared.Warning // the build's warnings (printWarnings)
}

func loadTreeInput(path string) (*treeInput, error) {
	if path != "" && (isTree(path) || missingTree(path)) {
		t, err := readTree(path)
		if err != nil {
			return nil, err
		}
		return &treeInput{name: path, tree: t}, nil
	}
	in := &treeInput{}
	var err error
	in.top, in.name, err = topology.LoadOrDefault(path)
	if err != nil {
		return nil, err
	}
	in.tree, in.warnings, err = buildWarned(in.top, in.name, 1)
	if err != nil {
		return nil, err
	}
	return in, nil
}

// buildWarned builds a topology read from name and returns its warnings.
func buildWarned(top *shared.Topology, name string, generation uint64) (*shared.Tree, []shared.Warning, error) {
	var ws []shared.Warning
	t, err := shared.Build(top, shared.BuildOptions{Generation: generation, Warn: func(w shared.Warning) { ws = append(ws, w) }})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	return t, ws, nil
}

// printWarnings writes each build warning to w (stderr) as a line naming
// the input, with the nearest known value ("did you mean").
func printWarnings(w io.Writer, name string, ws []shared.Warning) {
	for _, x := range ws {
		fmt.Fprintf(w, "warning: %s: %s\n", safe(name), safe(topology.WarningText(x)))
	}
}

// missingTree reports whether path names no file and is not named as a
// topology (.json, .yaml, .yml): its error is then the tree reader's.
func missingTree(path string) bool {
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		return false
	}
	switch filepath.Ext(path) {
	case ".json", ".yaml", ".yml":
		return false
	}
	return true
}

// isTree reports whether the file at path is to be read as an encoded
// tree: a regular file that begins with the tree magic, or something that
// is not a regular file (a pipe, /dev/zero: the topology reader refuses
// those, the tree reader reads them header first and stops at a bad one).
// A file it cannot open is left to the topology reader's errors.
func isTree(path string) bool {
	st, err := os.Stat(path)
	if err != nil {
		return false
	}
	if st.IsDir() {
		return false // a directory of topology files
	}
	if !st.Mode().IsRegular() {
		return true
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, shared.MagicSize)
	_, err = io.ReadFull(f, head)
	return err == nil && shared.IsEncoded(head)
}
