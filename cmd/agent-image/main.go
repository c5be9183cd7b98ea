// Command agent-image packs static loctree binaries, one per platform, as a
// multi-platform OCI image (an image index) with no base image, into an OCI
// image layout and a tar of it, then reads the layout back and verifies it.
// `make image` builds the binaries and runs it; pushing is the user's step
// (docs/ISTIO.md).
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/loctree/loctree/internal/ociimage"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "agent-image: %v\n", err)
		os.Exit(1)
	}
}

// binaryFlags collects --binary OS/ARCH=PATH.
type binaryFlags []ociimage.Binary

func (b *binaryFlags) String() string { return fmt.Sprint(len(*b), " binaries") }

func (b *binaryFlags) Set(v string) error {
	plat, path, ok := strings.Cut(v, "=")
	if !ok {
		return fmt.Errorf("--binary %q: want OS/ARCH=PATH", v)
	}
	p, err := v1.ParsePlatform(plat)
	if err != nil {
		return fmt.Errorf("--binary %q: %w", v, err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--binary %q: %w", v, err)
	}
	*b = append(*b, ociimage.Binary{Platform: *p, Data: data})
	return nil
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("agent-image", flag.ContinueOnError)
	var bins binaryFlags
	fs.Var(&bins, "binary", "OS/ARCH=PATH of a static loctree binary (repeat per platform)")
	dir := fs.String("dir", "bin/loctree-oci", "OCI image layout directory to write (replaced if it holds a layout)")
	tarPath := fs.String("tar", "bin/loctree-oci.tar", "tar of the layout to write (\"\": none)")
	tag := fs.String("tag", "0.1.0", "tag recorded in the layout's index")
	name := fs.String("name", "loctree/loctree", "image name, for the push hint")
	if err := fs.Parse(args); err != nil {
		return err
	}
	idx, err := ociimage.AgentIndex(bins)
	if err != nil {
		return err
	}
	if err := ociimage.ClearLayout(*dir); err != nil {
		return err
	}
	digest, err := ociimage.WriteLayout(idx, *dir, *tag)
	if err != nil {
		return err
	}
	if *tarPath != "" {
		if err := ociimage.WriteTar(*dir, *tarPath); err != nil {
			return err
		}
	}
	v, err := ociimage.ReadAgentLayout(*dir)
	if err != nil {
		return fmt.Errorf("verify %s: %w", *dir, err)
	}
	if v.Digest != digest {
		return fmt.Errorf("verify %s: index digest %s, built %s", *dir, v.Digest, digest)
	}
	fmt.Fprintf(out, "layout %s (tar %s), tag %s\nindex %s\n", *dir, *tarPath, *tag, digest)
	for _, b := range bins {
		p := b.Platform.String()
		fmt.Fprintf(out, "  %s image %s binary sha256:%x (%d bytes)\n", p, v.Images[p], v.Sums[p], len(b.Data))
	}
	repo := path.Base(*name)
	fmt.Fprintf(out, "push: crane push %s REGISTRY/%s:%s; pin REGISTRY/%s@%s\n", *dir, repo, *tag, repo, digest)
	return nil
}
