package istio

import (
	"io/fs"
	"maps"
	"path"
	"strings"
	"testing"

	istioext "istio.io/client-go/pkg/apis/extensions/v1alpha1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/loctree/loctree/internal/manifest"
)

// testWasmURL is the install input the tests give.
const testWasmURL = "oci://registry.test/loctree/loctree-wasm@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// kustomizeBuild runs kustomize (its Go library, for real) on dir, relative
// to istio/, on an in-memory copy of istio/ whose install.env is env.
func kustomizeBuild(dir, env string) ([]byte, error) {
	return kustomizeBuildWith(dir, env, nil)
}

// kustomizeBuildWith is kustomizeBuild with some files of istio/ replaced.
func kustomizeBuildWith(dir, env string, files map[string]string) ([]byte, error) {
	mem := filesys.MakeFsInMemory()
	err := fs.WalkDir(Files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := Files.ReadFile(p)
		if err != nil {
			return err
		}
		return mem.WriteFile(path.Join("/istio", p), data)
	})
	if err != nil {
		return nil, err
	}
	files = maps.Clone(files)
	if files == nil {
		files = map[string]string{}
	}
	files["install/install.env"] = env
	for p, data := range files {
		if err := mem.WriteFile(path.Join("/istio", p), []byte(data)); err != nil {
			return nil, err
		}
	}
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(mem, path.Join("/istio", dir))
	if err != nil {
		return nil, err
	}
	return m.AsYaml()
}

// installDirs are the kustomizations an operator applies.
var installDirs = []string{".", "overlays/persistent-session"}

// TestWasmURLRequired: the shipped install.env names no module, and every
// install build fails until wasmURL is set, with an error naming it; once
// set, it is the WasmPlugin's url. No manifest ships a registry placeholder.
func TestWasmURLRequired(t *testing.T) {
	shippedEnv, _ := Files.ReadFile("install/install.env") // none: as empty
	for _, dir := range installDirs {
		_, err := kustomizeBuild(dir, string(shippedEnv))
		if err == nil || !strings.Contains(err.Error(), "data.wasmURL") {
			t.Errorf("%s: build with the shipped install.env: err = %v, want a failure naming data.wasmURL", dir, err)
		}
		out, err := kustomizeBuild(dir, string(shippedEnv)+"wasmURL="+testWasmURL+"\n")
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		if got := pluginIn(t, out).Spec.Url; got != testWasmURL {
			t.Errorf("%s: WasmPlugin url = %q, want %q", dir, got, testWasmURL)
		}
		if strings.Contains(string(out), "loctree-install") {
			t.Errorf("%s: the install inputs ConfigMap is in the output", dir)
		}
	}
	for _, p := range manifestFiles(t) {
		data, _ := Files.ReadFile(p)
		if strings.Contains(string(data), "example.com/loctree") {
			t.Errorf("%s ships a placeholder registry", p)
		}
	}
}

// pluginIn returns the WasmPlugin of a kustomize output.
func pluginIn(t *testing.T, out []byte) *istioext.WasmPlugin {
	t.Helper()
	return objectIn[*istioext.WasmPlugin](t, out)
}

// objectIn returns the first object of type T in a kustomize output.
func objectIn[T runtime.Object](t *testing.T, out []byte) T {
	t.Helper()
	docs, err := manifest.Split(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		if obj, err := manifest.Decode(d); err == nil {
			if o, ok := obj.(T); ok {
				return o
			}
		}
	}
	var zero T
	t.Fatalf("no %T in the kustomize output", zero)
	return zero
}
