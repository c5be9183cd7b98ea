package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	istioext "istio.io/client-go/pkg/apis/extensions/v1alpha1"
	istionetv1alpha3 "istio.io/client-go/pkg/apis/networking/v1alpha3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/loctree/loctree/internal/manifest"
	"github.com/loctree/loctree/istio"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// testWasmURL is the filter module URL the tests give (a required option).
const testWasmURL = "oci://registry.test/loctree/loctree-wasm@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

var reviews = Options{Service: "reviews.default", Port: 9080, WasmURL: testWasmURL}

// TestGolden pins the YAML render prints for both steerings.
func TestGolden(t *testing.T) {
	for _, st := range []Steering{SteeringOverrideHost, SteeringPersistentSession} {
		t.Run(string(st), func(t *testing.T) {
			o := reviews
			o.Steering = st
			got := renderText(t, o, FormatYAML)
			golden := filepath.Join("testdata", "reviews-"+string(st)+".yaml")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("render differs from %s (go test -run TestGolden -update):\n%s", golden, got)
			}
		})
	}
}

func renderText(t *testing.T, o Options, format string) []byte {
	t.Helper()
	objs, err := Render(o)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Write(&buf, objs, format); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// decodeOutput decodes render's YAML stream or JSON List strictly.
func decodeOutput(t *testing.T, out []byte, format string) []runtime.Object {
	t.Helper()
	var docs [][]byte
	if format == FormatJSON {
		var list struct {
			APIVersion, Kind string
			Items            []json.RawMessage
		}
		if err := json.Unmarshal(out, &list); err != nil || list.Kind != "List" {
			t.Fatalf("not a List: %v", err)
		}
		for _, it := range list.Items {
			docs = append(docs, it)
		}
	} else {
		var err error
		if docs, err = manifest.Split(out); err != nil {
			t.Fatal(err)
		}
	}
	var objs []runtime.Object
	for _, d := range docs {
		obj, err := manifest.Decode(d)
		if err != nil {
			t.Fatalf("%v\n%s", err, d)
		}
		objs = append(objs, obj)
	}
	return objs
}

// TestOutputDecodesStrictly: every output (both steerings, both formats)
// decodes strictly into the official types, and every EnvoyFilter patch,
// merged into istiod's outbound cluster, passes go-control-plane validation.
func TestOutputDecodesStrictly(t *testing.T) {
	for _, st := range []Steering{SteeringOverrideHost, SteeringPersistentSession} {
		for _, format := range []string{FormatYAML, FormatJSON} {
			o := Options{Service: "ratings.shop", Port: 8080, Steering: st, WasmURL: "oci://registry.example.com/x/y:1", Domain: "example.internal"}
			objs := decodeOutput(t, renderText(t, o, format), format)
			wantN := map[Steering]int{SteeringOverrideHost: 4, SteeringPersistentSession: 3}[st]
			if len(objs) != wantN {
				t.Fatalf("%s %s: %d objects, want %d", st, format, len(objs), wantN)
			}
			var filters int
			for _, obj := range objs {
				switch o := obj.(type) {
				case *istionetv1alpha3.EnvoyFilter:
					filters++
					for _, p := range o.Spec.ConfigPatches {
						js, err := protojson.Marshal(p.Patch.Value)
						if err != nil {
							t.Fatal(err)
						}
						c := manifest.IstioOutboundCluster(p.Match.GetCluster().GetService(), p.Match.GetCluster().GetPortNumber())
						if err := manifest.MergeEnvoy(js, c); err != nil {
							t.Error(err)
						}
						if c.Name != "outbound|8080||ratings.shop.svc.example.internal" {
							t.Errorf("patch matches cluster %s", c.Name)
						}
					}
				case *corev1.Service:
					wantLabel := map[Steering]string{SteeringPersistentSession: SessionHeader}[st]
					if o.Annotations[EnabledAnnotation] != "true" || o.Labels[PersistentSessionLabel] != wantLabel {
						t.Errorf("service patch = %+v", o.ObjectMeta)
					}
				}
			}
			if (filters == 1) != (st == SteeringOverrideHost) {
				t.Errorf("%s: %d EnvoyFilters", st, filters)
			}
		}
	}
}

// TestMatchesManifests: what render prints for reviews.default:9080 is what
// istio/ ships (the base WasmPlugin, the example EnvoyFilter), field for field.
func TestMatchesManifests(t *testing.T) {
	objs, err := Render(reviews)
	if err != nil {
		t.Fatal(err)
	}
	plugin := shipped(t, "base/wasmplugin.yaml").(*istioext.WasmPlugin)
	plugin.Spec.Url = testWasmURL // the install input kustomize puts in (istio/install)
	if got := objs[0].(*istioext.WasmPlugin); !proto.Equal(&got.Spec, &plugin.Spec) || got.Name != plugin.Name || got.Namespace != plugin.Namespace {
		t.Errorf("rendered WasmPlugin differs from istio/base/wasmplugin.yaml:\n got %v\nwant %v", &got.Spec, &plugin.Spec)
	}
	ef := shipped(t, "examples/override-host-envoyfilter.yaml").(*istionetv1alpha3.EnvoyFilter)
	if got := objs[2].(*istionetv1alpha3.EnvoyFilter); !proto.Equal(&got.Spec, &ef.Spec) || got.Name != ef.Name {
		t.Errorf("rendered EnvoyFilter differs from istio/examples/override-host-envoyfilter.yaml")
	}
}

func shipped(t *testing.T, p string) runtime.Object {
	t.Helper()
	data, err := istio.Files.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := manifest.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

func TestBadOptions(t *testing.T) {
	for _, o := range []Options{
		{Service: "reviews", Port: 80},
		{Service: "a.b.c", Port: 80},
		{Service: "Reviews.default", Port: 80},
		{Service: "reviews.default", Port: 0},
		{Service: "reviews.default", Port: 70000},
		{Service: "reviews.default", Port: 80, Steering: "sticky", WasmURL: testWasmURL},
		{Service: "reviews.default", Port: 80}, // no WasmURL: required, no placeholder default
		{Service: "reviews.default", Port: 80, WasmURL: "registry.test/loctree-wasm:1"},
	} {
		if _, err := Render(o); !errors.Is(err, ErrOptions) {
			t.Errorf("Render(%+v) err = %v, want ErrOptions", o, err)
		}
	}
	if err := Write(&bytes.Buffer{}, nil, "table"); !errors.Is(err, ErrOptions) {
		t.Errorf("Write(table) err = %v", err)
	}
}

// Issue 20, section 2: an oci:// URL pinned by digest must carry a real
// digest (the docs' placeholder sha256:DIGEST is refused), as the OCI
// image spec defines it (descriptor.md, "Digests": sha256 is 64 and sha512
// 128 lowercase hex characters).
func TestWasmURLDigest(t *testing.T) {
	hex64 := strings.Repeat("0123456789abcdef", 4)
	for _, u := range []string{
		"oci://REGISTRY/loctree-wasm@sha256:DIGEST",
		"oci://r.test/loctree-wasm@sha256:" + hex64[:63],
		"oci://r.test/loctree-wasm@sha256:" + strings.ToUpper(hex64),
		"oci://r.test/loctree-wasm@sha256:" + hex64 + "0",
		"oci://r.test/loctree-wasm@md5:" + hex64[:32],
		"oci://r.test/loctree-wasm@" + hex64,
	} {
		_, err := Render(Options{Service: "reviews.default", Port: 9080, WasmURL: u})
		if !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), "digest") {
			t.Errorf("%s: err = %v, want a bad digest", u, err)
		}
	}
	for _, u := range []string{
		"oci://r.test/loctree-wasm@sha256:" + hex64,
		"oci://r.test/loctree-wasm:1.2@sha256:" + hex64,
		"oci://r.test/loctree-wasm@sha512:" + hex64 + hex64,
		"oci://r.test/loctree-wasm:1",
		"https://r.test/loctree.wasm",
	} {
		if _, err := Render(Options{Service: "reviews.default", Port: 9080, WasmURL: u}); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
}
