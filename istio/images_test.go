package istio

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	kusttypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"

	"github.com/loctree/loctree/internal/manifest"
)

// TestContainersRequestResources: every container of the agent's pod, the
// init container included, requests cpu and memory (the scheduler places
// a pod by the largest of its init containers' requests and the sum of its
// containers'), and has a memory limit.
func TestContainersRequestResources(t *testing.T) {
	ds := decodeFile(t, "base/daemonset.yaml")[0].(*appsv1.DaemonSet)
	spec := ds.Spec.Template.Spec
	for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
		r := c.Resources
		if r.Requests.Cpu().IsZero() || r.Requests.Memory().IsZero() || r.Limits.Memory().IsZero() {
			t.Errorf("container %s: requests %v, limits %v; want cpu and memory requests and a memory limit", c.Name, r.Requests, r.Limits)
		}
	}
}

// TestImagesPinnableByDigest: both images of the DaemonSet are named in the
// kustomization's images list, so `kustomize edit set image NAME=REF@sha256:…`
// pins them; a build with digests for both puts them in every container.
func TestImagesPinnableByDigest(t *testing.T) {
	const agentRef = "registry.test/loctree/loctree@sha256:1111111111111111111111111111111111111111111111111111111111111111"
	const busyboxRef = "registry.test/library/busybox@sha256:2222222222222222222222222222222222222222222222222222222222222222"
	base, err := Files.ReadFile("base/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var k kusttypes.Kustomization
	if err := yaml.UnmarshalStrict(base, &k); err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, im := range k.Images {
		listed[im.Name] = true
	}
	ds := decodeFile(t, "base/daemonset.yaml")[0].(*appsv1.DaemonSet)
	for _, c := range append(append([]corev1.Container{}, ds.Spec.Template.Spec.InitContainers...), ds.Spec.Template.Spec.Containers...) {
		if name, _, _ := strings.Cut(c.Image, ":"); !listed[name] {
			t.Errorf("container %s: image %s is not in base/kustomization.yaml's images list", c.Name, name)
		}
	}
	pinned := string(base) + `- name: loctree/loctree
  newName: registry.test/loctree/loctree
  digest: sha256:1111111111111111111111111111111111111111111111111111111111111111
- name: busybox
  newName: registry.test/library/busybox
  digest: sha256:2222222222222222222222222222222222222222222222222222222222222222
`
	out, err := kustomizeBuildWith(".", "wasmURL="+testWasmURL+"\n", map[string]string{"base/kustomization.yaml": pinned})
	if err != nil {
		t.Fatal(err)
	}
	docs, err := manifest.Split(out)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	for _, d := range docs {
		obj, err := manifest.Decode(d)
		if err != nil {
			t.Fatal(err)
		}
		ds, ok := obj.(*appsv1.DaemonSet)
		if !ok {
			continue
		}
		spec := ds.Spec.Template.Spec
		for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
			n++
			if c.Image != agentRef && c.Image != busyboxRef {
				t.Errorf("container %s: image %s is not pinned by the kustomization's images list", c.Name, c.Image)
			}
			if !strings.Contains(c.Image, "@sha256:") {
				t.Errorf("container %s: image %s has no digest", c.Name, c.Image)
			}
		}
	}
	if n != 2 {
		t.Errorf("%d containers, want 2", n)
	}
}
