package charts

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	istioext "istio.io/client-go/pkg/apis/extensions/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	kusttypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/loctree/loctree/internal/manifest"
	"github.com/loctree/loctree/istio"
)

const testWasmURL = "oci://registry.test/loctree/loctree-wasm@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// helmTemplate renders charts/loctree as `helm template loctree charts/loctree
// -n loctree-system` does, with Helm's engine (helm.sh/helm/v3), and returns
// the rendered documents (templates' outputs joined).
func helmTemplate(t *testing.T, vals map[string]any) ([]byte, error) {
	t.Helper()
	ch, err := loader.LoadDir("loctree")
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Validate(); err != nil {
		t.Fatal(err)
	}
	rv, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{Name: "loctree", Namespace: "loctree-system", IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, err
	}
	files, err := engine.Render(ch, rv)
	if err != nil {
		return nil, err
	}
	var names []string
	for name := range files {
		if strings.HasSuffix(name, ".yaml") && strings.TrimSpace(files[name]) != "" { // helm leaves out a template that renders empty
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var out strings.Builder
	for _, name := range names {
		out.WriteString("---\n" + files[name] + "\n")
	}
	return []byte(out.String()), nil
}

// kustomizeBuild builds dir of istio/ (in memory) with wasmURL as the install input.
func kustomizeBuild(t *testing.T, dir string) []byte {
	t.Helper()
	mem := filesys.MakeFsInMemory()
	err := fs.WalkDir(istio.Files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := istio.Files.ReadFile(p)
		if err != nil {
			return err
		}
		return mem.WriteFile(path.Join("/istio", p), data)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := mem.WriteFile("/istio/install/install.env", []byte("wasmURL="+testWasmURL+"\n")); err != nil {
		t.Fatal(err)
	}
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(mem, path.Join("/istio", dir))
	if err != nil {
		t.Fatal(err)
	}
	out, err := m.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// typed decodes each object of a YAML stream into its official type (each
// must decode).
func typed(t *testing.T, stream []byte) []any {
	t.Helper()
	docs, err := manifest.Split(stream)
	if err != nil {
		t.Fatal(err)
	}
	var out []any
	for _, d := range docs {
		obj, err := manifest.Decode(d)
		if err != nil {
			t.Fatalf("%v\n%s", err, d)
		}
		out = append(out, obj)
	}
	return out
}

// objects decodes a YAML stream strictly into the official types (each must
// decode) and returns each object as a generic map keyed by kind/namespace/name.
func objects(t *testing.T, stream []byte) map[string]map[string]any {
	t.Helper()
	docs, err := manifest.Split(stream)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, d := range docs {
		if _, err := manifest.Decode(d); err != nil {
			t.Fatalf("%v\n%s", err, d)
		}
		js, err := yaml.YAMLToJSON(d)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(js, &m); err != nil {
			t.Fatal(err)
		}
		meta, _ := m["metadata"].(map[string]any)
		key := fmt.Sprintf("%s/%v/%v", m["kind"], meta["namespace"], meta["name"])
		if _, dup := out[key]; dup {
			t.Fatalf("%s twice", key)
		}
		out[key] = m
	}
	return out
}

// TestChartEqualsKustomize: `helm template` of the chart with the default
// values (and the required wasm.url) gives the same objects, field for
// field, as the kustomize build of istio/; with steering persistent-session
// or source xds, the same as that overlay.
func TestChartEqualsKustomize(t *testing.T) {
	for dir, vals := range map[string]map[string]any{
		".":                           {"wasm": map[string]any{"url": testWasmURL}},
		"overlays/persistent-session": {"wasm": map[string]any{"url": testWasmURL}, "steering": "persistent-session"},
		"overlays/xds":                {"wasm": map[string]any{"url": testWasmURL}, "source": "xds"},
	} {
		t.Run(dir, func(t *testing.T) {
			out, err := helmTemplate(t, vals)
			if err != nil {
				t.Fatal(err)
			}
			got, want := objects(t, out), objects(t, kustomizeBuild(t, dir))
			gk, wk := slices.Sorted(mapsKeys(got)), slices.Sorted(mapsKeys(want))
			objs := 8
			if dir == "overlays/xds" {
				objs = 6 // no ClusterRole and binding: the agent calls no Kubernetes API
			}
			if len(wk) != objs {
				t.Errorf("kustomize builds %d objects, want %d: %v", len(wk), objs, wk)
			}
			if !slices.Equal(gk, wk) {
				t.Fatalf("helm renders %v\nkustomize builds %v", gk, wk)
			}
			for _, k := range wk {
				if !reflect.DeepEqual(got[k], want[k]) {
					g, _ := json.MarshalIndent(got[k], "", " ")
					w, _ := json.MarshalIndent(want[k], "", " ")
					t.Errorf("%s differs:\nhelm %s\nkustomize %s", k, g, w)
				}
			}
		})
	}
}

func mapsKeys(m map[string]map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestChartValues: the wasm URL is required; mode gateway selects the
// gateways in their namespace; digests pin both images; bad choices fail.
func TestChartValues(t *testing.T) {
	if _, err := helmTemplate(t, nil); err == nil || !strings.Contains(err.Error(), "wasm.url is required") {
		t.Errorf("no wasm.url: err = %v", err)
	}
	out, err := helmTemplate(t, map[string]any{
		"wasm":      map[string]any{"url": testWasmURL, "failStrategy": "FAIL_CLOSE"},
		"mode":      "gateway",
		"gateway":   map[string]any{"namespace": "gw", "selector": map[string]any{"app": "edge"}},
		"image":     map[string]any{"repository": "registry.test/loctree", "digest": "sha256:" + strings.Repeat("1", 64)},
		"initImage": map[string]any{"digest": "sha256:" + strings.Repeat("2", 64)},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range typed(t, out) {
		switch o := obj.(type) {
		case *istioext.WasmPlugin:
			if o.Namespace != "gw" || o.Spec.Selector.GetMatchLabels()["app"] != "edge" || o.Spec.FailStrategy.String() != "FAIL_CLOSE" {
				t.Errorf("gateway WasmPlugin: %s %v %v", o.Namespace, o.Spec.Selector, o.Spec.FailStrategy)
			}
		case *appsv1.DaemonSet:
			spec := o.Spec.Template.Spec
			if spec.Containers[0].Image != "registry.test/loctree@sha256:"+strings.Repeat("1", 64) || spec.InitContainers[0].Image != "busybox@sha256:"+strings.Repeat("2", 64) {
				t.Errorf("images %s, %s: not pinned by digest", spec.Containers[0].Image, spec.InitContainers[0].Image)
			}
		}
	}
	for _, bad := range []map[string]any{{"mode": "ambient"}, {"steering": "sticky"}, {"source": "eds"}, {"wasm": map[string]any{"failStrategy": "NEVER"}},
		{"trafficScope": ""}, {"trafficScope": "zone;x"}, {"trafficScope": "a b"}} {
		bad["wasm"] = mergeURL(bad["wasm"])
		if _, err := helmTemplate(t, bad); err == nil {
			t.Errorf("%v: rendered", bad)
		}
	}
}

func mergeURL(v any) map[string]any {
	m, _ := v.(map[string]any)
	if m == nil {
		m = map[string]any{}
	}
	m["url"] = testWasmURL
	return m
}

// TestImageVariablesAgree: `make image` names the agent's image with IMAGE
// and IMAGE_TAG; the kustomization's images entry and the chart's
// image.repository/image.tag use the same defaults.
func TestImageVariablesAgree(t *testing.T) {
	mk, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^(IMAGE|IMAGE_TAG) \?= (\S+)$`).FindAllStringSubmatch(string(mk), -1) {
		vars[m[1]] = m[2]
	}
	var k kusttypes.Kustomization
	data, _ := istio.Files.ReadFile("base/kustomization.yaml")
	if err := yaml.UnmarshalStrict(data, &k); err != nil {
		t.Fatal(err)
	}
	var kustTag string
	for _, im := range k.Images {
		if im.Name == vars["IMAGE"] {
			kustTag = im.NewTag
		}
	}
	var values struct {
		Image struct{ Repository, Tag string } `json:"image"`
	}
	data, _ = os.ReadFile("loctree/values.yaml")
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatal(err)
	}
	if vars["IMAGE"] == "" || kustTag != vars["IMAGE_TAG"] || values.Image.Repository != vars["IMAGE"] || values.Image.Tag != vars["IMAGE_TAG"] {
		t.Errorf("Makefile IMAGE=%q IMAGE_TAG=%q; kustomization tag %q for it; chart %s:%s", vars["IMAGE"], vars["IMAGE_TAG"], kustTag, values.Image.Repository, values.Image.Tag)
	}
}

// TestNotesNameTheMeshStatTags: the chart's notes give the mesh config that
// istio/mesh/istiod-values.yaml holds (the same extraStatTags, in the same
// values shape), since the chart cannot set istiod's values itself.
func TestNotesNameTheMeshStatTags(t *testing.T) {
	notes := renderedNotes(t)
	block := notes[strings.Index(notes, "meshConfig:"):]
	block = block[:strings.Index(block, "\n\n")+1]
	var got, want map[string]any
	if err := yaml.Unmarshal([]byte(block), &got); err != nil {
		t.Fatalf("notes' mesh config: %v\n%s", err, block)
	}
	shipped, err := istio.Files.ReadFile("mesh/istiod-values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(shipped, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("notes give %v, istio/mesh/istiod-values.yaml %v", got, want)
	}
	if !strings.Contains(notes, "sidecar.istio.io/extraStatTags: loctree_service,loctree_level,loctree_traffic_source,loctree_traffic_destination") {
		t.Errorf("notes lack the pod annotation:\n%s", notes)
	}
}

// renderedNotes renders templates/NOTES.txt with the default values.
func renderedNotes(t *testing.T) string {
	t.Helper()
	ch, err := loader.LoadDir("loctree")
	if err != nil {
		t.Fatal(err)
	}
	rv, err := chartutil.ToRenderValues(ch, map[string]any{"wasm": map[string]any{"url": testWasmURL}},
		chartutil.ReleaseOptions{Name: "loctree", Namespace: "loctree-system", IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	files, err := engine.Render(ch, rv)
	if err != nil {
		t.Fatal(err)
	}
	notes, ok := files["loctree/templates/NOTES.txt"]
	if !ok {
		t.Fatal("no templates/NOTES.txt")
	}
	return notes
}

// TestChartTrafficScope: trafficScope reaches both planes' traffic
// counters (the agent's --traffic-scope, the filter's traffic_scope); the
// default, zone, renders neither, as the kustomize manifests do not.
func TestChartTrafficScope(t *testing.T) {
	out, err := helmTemplate(t, map[string]any{"wasm": map[string]any{"url": testWasmURL}, "trafficScope": "region"})
	if err != nil {
		t.Fatal(err)
	}
	var agent, filter bool
	for _, obj := range typed(t, out) {
		switch o := obj.(type) {
		case *istioext.WasmPlugin:
			filter = o.Spec.PluginConfig.GetFields()["traffic_scope"].GetStringValue() == "region"
		case *appsv1.DaemonSet:
			agent = slices.Contains(o.Spec.Template.Spec.Containers[0].Args, "--traffic-scope=region")
		}
	}
	if !agent || !filter {
		t.Fatalf("trafficScope region: agent flag %v, filter traffic_scope %v; want both", agent, filter)
	}
}
