package realcp

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// versionFlags stamp kube-apiserver's version: without them /version says
// v0.0.0 (k8s.io/component-base/version). -s -w: no symbol table or DWARF,
// which nobody debugging a test needs and the linker takes time to write.
const versionFlags = "-s -w -X k8s.io/component-base/version.gitVersion=" + KubernetesVersion +
	" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37"

// Build builds the binaries into BinDir from the module in toolsDir
// (internal/testing/realcp/tools), unless they are there already. go's
// output goes to out.
func Build(ctx context.Context, toolsDir string, out io.Writer) error {
	if _, err := findBinaries(); err == nil {
		return nil
	}
	dir, err := BinDir()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("make %s: %w", dir, err)
	}
	builds := []struct{ bin, pkg, ldflags string }{
		{apiserverBin, "k8s.io/kubernetes/cmd/kube-apiserver", versionFlags},
		{etcdBin, "./etcd", "-s -w"},
	}
	for _, b := range builds {
		if err := goBuild(ctx, toolsDir, filepath.Join(dir, b.bin), b.pkg, b.ldflags, out); err != nil {
			return err
		}
	}
	return nil
}

// goBuild builds pkg to a temporary name beside bin and renames it, so an
// interrupted build never leaves a binary that looks cached.
func goBuild(ctx context.Context, toolsDir, bin, pkg, ldflags string, out io.Writer) error {
	tmp := bin + ".partial"
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", ldflags, "-o", tmp, pkg)
	cmd.Dir, cmd.Stdout, cmd.Stderr = toolsDir, out, out
	fmt.Fprintf(out, "build %s (in %s: %s)\n", bin, toolsDir, cmd.String())
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build %s: %w", pkg, err)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return fmt.Errorf("install %s: %w", bin, err)
	}
	return nil
}
