package ociimage

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The agent image: an image index with one image per platform, with no base
// image; each image is one layer holding only the binary at agentBinaryPath,
// whose entrypoint it is.

// agentBinaryPath is where the agent image holds the binary.
const agentBinaryPath = "usr/local/bin/loctree"

// Binary is the loctree binary built for one platform.
type Binary struct {
	Platform v1.Platform
	Data     []byte
}

// AgentIndex packs binaries, one per platform, as an OCI image index.
// Binaries without a platform or content are ErrBadAgentImage.
func AgentIndex(binaries []Binary) (v1.ImageIndex, error) {
	if len(binaries) == 0 {
		return nil, fmt.Errorf("%w: no binary", ErrBadAgentImage)
	}
	var adds []mutate.IndexAddendum
	for _, b := range binaries {
		img, err := agentImage(b)
		if err != nil {
			return nil, err
		}
		p := b.Platform
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	return mutate.IndexMediaType(mutate.AppendManifests(empty.Index, adds...), types.OCIImageIndex), nil
}

// agentImage packs one binary as a single-layer OCI image for its platform.
func agentImage(b Binary) (v1.Image, error) {
	if b.Platform.OS == "" || b.Platform.Architecture == "" || len(b.Data) == 0 {
		return nil, fmt.Errorf("%w: binary for %q: want an OS, an architecture and content", ErrBadAgentImage, b.Platform.String())
	}
	layerTar, err := binaryTar(b.Data)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = b.Platform.OS, b.Platform.Architecture, b.Platform.Variant
	cf.Config.Entrypoint = []string{"/" + agentBinaryPath}
	cf.Config.Env = []string{"PATH=/usr/local/bin"}
	cf.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	return mutate.ConfigFile(img, cf)
}

// binaryTar is a tar of the binary at agentBinaryPath (with its
// directories), owned by root, with no times: the same binary gives the
// same bytes.
func binaryTar(data []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, dir := range []string{"usr/", "usr/local/", "usr/local/bin/"} {
		if err := tw.WriteHeader(&tar.Header{Name: dir, Typeflag: tar.TypeDir, Mode: 0o755, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
	}
	h := &tar.Header{Name: agentBinaryPath, Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(data)), ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
	if err := tw.WriteHeader(h); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// AgentLayout is what ReadAgentLayout found.
type AgentLayout struct {
	Digest v1.Hash             // the image index's digest
	Tag    string              // its ref.name in the layout
	Images map[string]v1.Hash  // platform ("linux/amd64") → image manifest digest
	Sums   map[string][32]byte // platform → sha256 of the binary it holds
}

// ReadAgentLayout reads the agent's OCI layout in dir back, recomputes
// every digest from the stored blobs (go-containerregistry's layout reader
// checks each blob against its descriptor), and checks that each
// platform's image is one layer holding only the binary, run as the
// entrypoint, for that platform. Errors about the content wrap
// ErrBadAgentImage.
func ReadAgentLayout(dir string) (*AgentLayout, error) {
	top, err := readLayout(dir)
	if err != nil {
		return nil, err
	}
	tm, err := top.IndexManifest()
	if err != nil || len(tm.Manifests) != 1 || tm.Manifests[0].MediaType != types.OCIImageIndex {
		return nil, fmt.Errorf("%w: index.json should name one image index (%v)", ErrBadAgentImage, err)
	}
	idx, err := top.ImageIndex(tm.Manifests[0].Digest)
	if err != nil {
		return nil, fmt.Errorf("read layout: %w", err)
	}
	v := &AgentLayout{Digest: tm.Manifests[0].Digest, Tag: tm.Manifests[0].Annotations[annRefName], Images: map[string]v1.Hash{}, Sums: map[string][32]byte{}}
	if d, err := idx.Digest(); err != nil || d != v.Digest {
		return nil, fmt.Errorf("%w: index digest %s, recorded %s (%v)", ErrBadAgentImage, d, v.Digest, err)
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

func (v *AgentLayout) addImage(idx v1.ImageIndex, desc v1.Descriptor) error {
	if desc.Platform == nil {
		return fmt.Errorf("%w: manifest %s has no platform", ErrBadAgentImage, desc.Digest)
	}
	img, err := idx.Image(desc.Digest)
	if err != nil {
		return err
	}
	if d, err := img.Digest(); err != nil || d != desc.Digest {
		return fmt.Errorf("%w: image digest %s, recorded %s (%v)", ErrBadAgentImage, d, desc.Digest, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	if cf.OS != desc.Platform.OS || cf.Architecture != desc.Platform.Architecture || len(cf.Config.Entrypoint) != 1 || cf.Config.Entrypoint[0] != "/"+agentBinaryPath {
		return fmt.Errorf("%w: %s: config %s/%s entrypoint %v", ErrBadAgentImage, desc.Platform, cf.OS, cf.Architecture, cf.Config.Entrypoint)
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
		return [32]byte{}, fmt.Errorf("%w: %d layers, want 1 (%v)", ErrBadAgentImage, len(layers), err)
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
			return sum, fmt.Errorf("%w: layer: %v", ErrBadAgentImage, err)
		}
		switch {
		case h.Typeflag == tar.TypeDir:
		case h.Name == agentBinaryPath && h.Typeflag == tar.TypeReg && h.Mode&0o111 != 0:
			h := sha256.New()
			if _, err := io.Copy(h, tr); err != nil {
				return sum, err
			}
			copy(sum[:], h.Sum(nil))
			found = true
		default:
			return sum, fmt.Errorf("%w: unexpected file %s in the layer", ErrBadAgentImage, h.Name)
		}
	}
	if !found {
		return sum, fmt.Errorf("%w: no executable %s", ErrBadAgentImage, agentBinaryPath)
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
		return fmt.Errorf("%w: layer blob is %s, the manifest says %s", ErrBadAgentImage, got, want)
	}
	return nil
}
