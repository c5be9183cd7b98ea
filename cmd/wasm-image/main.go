// Command wasm-image packs the loctree filter module as an OCI image layout
// (a directory and a tar of it) in the Wasm Artifact Image layout that Istio's
// WasmPlugin oci:// URLs accept. `make wasm-image` runs it; pushing the image
// to a registry is the user's step (docs/ISTIO.md).
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/loctree/loctree/internal/ociimage"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "wasm-image: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("wasm-image", flag.ContinueOnError)
	module := fs.String("module", "bin/loctree.wasm", "the filter module")
	dir := fs.String("dir", "bin/loctree-wasm-oci", "OCI image layout directory to write (replaced if it holds a layout)")
	tarPath := fs.String("tar", "bin/loctree-wasm-oci.tar", "tar of the layout to write (\"\": none)")
	tag := fs.String("tag", "latest", "tag recorded in the layout's index")
	rootID := fs.String("root-id", "loctree", "root ID recorded in the runtime config")
	if err := fs.Parse(args); err != nil {
		return err
	}
	b, err := os.ReadFile(*module)
	if err != nil {
		return fmt.Errorf("read module: %w (build it with make wasm)", err)
	}
	img, err := ociimage.WasmImage(b, *rootID)
	if err != nil {
		return fmt.Errorf("%s: %w", *module, err)
	}
	if err := ociimage.ClearLayout(*dir); err != nil {
		return err
	}
	digest, err := ociimage.WriteLayout(img, *dir, *tag)
	if err != nil {
		return err
	}
	if *tarPath != "" {
		if err := ociimage.WriteTar(*dir, *tarPath); err != nil {
			return err
		}
	}
	_, layer, err := ociimage.ReadWasmLayout(*dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "layout %s (tar %s)\nmanifest %s\nmodule layer %s (%d bytes)\n", *dir, *tarPath, digest, layer, len(b))
	return nil
}
