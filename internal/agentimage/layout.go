package agentimage

import (
	"archive/tar"
	"crypto/sha256"
	"fmt"
	"io"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const annRefName = "org.opencontainers.image.ref.name"

// WriteLayout writes idx as a fresh OCI image layout in dir (which must not
// exist or be empty), its entry in the layout's index.json tagged tag, and
// returns the image index's digest: what to pin (REGISTRY/loctree@DIGEST).
func WriteLayout(idx v1.ImageIndex, dir, tag string) (v1.Hash, error) {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return v1.Hash{}, fmt.Errorf("write layout: %s is not empty", dir)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("write layout: %w", err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{annRefName: tag})); err != nil {
		return v1.Hash{}, fmt.Errorf("write layout: %w", err)
	}
	return idx.Digest()
}

// Verified is what ReadLayout found.
type Verified struct {
	Digest v1.Hash             // the image index's digest
	Tag    string              // its ref.name in the layout
	Images map[string]v1.Hash  // platform ("linux/amd64") → image manifest digest
	Sums   map[string][32]byte // platform → sha256 of the binary it holds
}

// ReadLayout reads the OCI layout in dir back, recomputes every digest
// from the stored blobs (go-containerregistry's layout reader checks each
// blob against its descriptor), and checks that each platform's image is
// one layer holding only the binary, run as the entrypoint, for that
// platform. Errors about the content wrap ErrBadImage.
func ReadLayout(dir string) (*Verified, error) {
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("read layout: %w", err)
	}
	tm, err := top.IndexManifest()
	if err != nil || len(tm.Manifests) != 1 || tm.Manifests[0].MediaType != types.OCIImageIndex {
		return nil, fmt.Errorf("%w: index.json should name one image index (%v)", ErrBadImage, err)
	}
	idx, err := top.ImageIndex(tm.Manifests[0].Digest)
	if err != nil {
		return nil, fmt.Errorf("read layout: %w", err)
	}
	v := &Verified{Digest: tm.Manifests[0].Digest, Tag: tm.Manifests[0].Annotations[annRefName], Images: map[string]v1.Hash{}, Sums: map[string][32]byte{}}
	if d, err := idx.Digest(); err != nil || d != v.Digest {
		return nil, fmt.Errorf("%w: index digest %s, recorded %s (%v)", ErrBadImage, d, v.Digest, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, desc := range im.Manifests {
		if err := v.addImage(idx, desc); err != nil {
			return nil, err
		}
	}
	return v, nil
}

func (v *Verified) addImage(idx v1.ImageIndex, desc v1.Descriptor) error {
	if desc.Platform == nil {
		return fmt.Errorf("%w: manifest %s has no platform", ErrBadImage, desc.Digest)
	}
	img, err := idx.Image(desc.Digest)
	if err != nil {
		return err
	}
	if d, err := img.Digest(); err != nil || d != desc.Digest {
		return fmt.Errorf("%w: image digest %s, recorded %s (%v)", ErrBadImage, d, desc.Digest, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	if cf.OS != desc.Platform.OS || cf.Architecture != desc.Platform.Architecture || len(cf.Config.Entrypoint) != 1 || cf.Config.Entrypoint[0] != "/"+BinaryPath {
		return fmt.Errorf("%w: %s: config %s/%s entrypoint %v", ErrBadImage, desc.Platform, cf.OS, cf.Architecture, cf.Config.Entrypoint)
	}
	sum, err := binarySum(img)
	if err != nil {
		return fmt.Errorf("%s: %w", desc.Platform, err)
	}
	v.Images[desc.Platform.String()] = desc.Digest
	v.Sums[desc.Platform.String()] = sum
	return nil
}

// binarySum checks that img is one layer holding only the binary (and its
// directories) and returns the binary's sha256.
func binarySum(img v1.Image) ([32]byte, error) {
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		return [32]byte{}, fmt.Errorf("%w: %d layers, want 1 (%v)", ErrBadImage, len(layers), err)
	}
	if err := checkBlob(layers[0]); err != nil {
		return [32]byte{}, err
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		return [32]byte{}, err
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	var sum [32]byte
	var found bool
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return sum, fmt.Errorf("%w: layer: %v", ErrBadImage, err)
		}
		switch {
		case h.Typeflag == tar.TypeDir:
		case h.Name == BinaryPath && h.Typeflag == tar.TypeReg && h.Mode&0o111 != 0:
			h := sha256.New()
			if _, err := io.Copy(h, tr); err != nil {
				return sum, err
			}
			copy(sum[:], h.Sum(nil))
			found = true
		default:
			return sum, fmt.Errorf("%w: unexpected file %s in the layer", ErrBadImage, h.Name)
		}
	}
	if !found {
		return sum, fmt.Errorf("%w: no executable %s", ErrBadImage, BinaryPath)
	}
	return sum, nil
}

// checkBlob recomputes the layer blob's sha256 and compares it with the
// digest the manifest records for it.
func checkBlob(l v1.Layer) error {
	want, err := l.Digest()
	if err != nil {
		return err
	}
	rc, err := l.Compressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	h := sha256.New()
	if _, err := io.Copy(h, rc); err != nil {
		return err
	}
	if got := fmt.Sprintf("sha256:%x", h.Sum(nil)); got != want.String() {
		return fmt.Errorf("%w: layer blob is %s, the manifest says %s", ErrBadImage, got, want)
	}
	return nil
}
