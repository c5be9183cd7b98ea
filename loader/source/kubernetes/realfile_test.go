package kubernetes

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/loctree/loctree/loader/source"
	"github.com/loctree/loctree/loader/source/file"
	"github.com/loctree/loctree/shared"
)

// checkSameAsFile writes the test's tree services of u as a topology file
// (docs/TOPOLOGY.md), reads it back through the agent's file source, and
// compares the two trees byte for byte: the same cluster state gives the
// same tree through the real API server and through a topology file.
func (r *realServer) checkSameAsFile(t *testing.T, u Update) {
	t.Helper()
	own := &shared.Topology{Services: r.ownServices(u)}
	data, err := yaml.Marshal(own)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "topology.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	fromFile := firstFileUpdate(t, path)
	if real, got := mustBuild(t, own).Bytes(), mustBuild(t, fromFile).Bytes(); !bytes.Equal(real, got) {
		t.Errorf("trees differ: real server %s; topology file %s", describe(own.Services), describe(fromFile.Services))
	}
}

// firstFileUpdate runs the file source on path until its first update and
// returns the services it names.
func firstFileUpdate(t *testing.T, path string) *shared.Topology {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	top := &shared.Topology{}
	var readErr error
	err := file.New(file.Config{Path: path}).Run(ctx, func(u source.Update) error {
		defer cancel()
		for _, name := range u.Changed {
			spec, err := u.Services.Spec(name)
			if err != nil {
				readErr = err
				return err
			}
			top.Services = append(top.Services, *spec)
		}
		return nil
	})
	if err != nil || readErr != nil {
		t.Fatalf("file source: %v %v", err, readErr)
	}
	return top
}
