package realcp

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// istioCRDs is Istio's CRD file (manifests/charts/base/files of the
// istio.io/istio module istiod is built from), kept beside istiod.
const istioCRDs = "crd-all.gen.yaml"

// copyIstioCRDs copies istioCRDs from the istio module of toolsDir into
// dir, unless it is there.
func copyIstioCRDs(ctx context.Context, toolsDir, dir string) error {
	dst := filepath.Join(dir, istioCRDs)
	if _, err := os.Stat(dst); err == nil {
		return nil
	}
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "istio.io/istio")
	cmd.Dir = toolsDir
	mod, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("find the istio module in %s: %w", toolsDir, err)
	}
	data, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(mod)), "manifests", "charts", "base", "files", istioCRDs))
	if err != nil {
		return err
	}
	return writeFile(dst, data)
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// ApplyIstioCRDs creates the named Istio CRDs (e.g.
// "workloadentries.networking.istio.io") on cp, unless they exist, and
// waits until they are established. The CRDs are cluster-wide and stay:
// every test of the control plane may use them.
func ApplyIstioCRDs(tb testing.TB, cp *ControlPlane, names ...string) {
	tb.Helper()
	RequireIstiod(tb)
	dir, err := IstiodDir()
	if err != nil {
		tb.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, istioCRDs))
	if err != nil {
		skip(tb, "needs Istio's CRDs beside istiod (run `%s`): %v", BuildCommand, err)
	}
	dyn := dynamic.NewForConfigOrDie(cp.Admin())
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for _, doc := range bytes.Split(data, []byte("\n---")) {
		var u unstructured.Unstructured
		if err := yaml.Unmarshal(doc, &u.Object); err != nil || !slices.Contains(names, u.GetName()) {
			continue
		}
		if _, err := dyn.Resource(crdResource).Create(ctx, &u, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			tb.Fatalf("create CRD %s: %v", u.GetName(), err)
		}
	}
	for _, name := range names {
		if err := waitEstablished(ctx, dyn, name); err != nil {
			tb.Fatal(err)
		}
	}
}

func waitEstablished(ctx context.Context, dyn dynamic.Interface, name string) error {
	for {
		u, err := dyn.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
		if err == nil && established(u) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("CRD %s not established: %v", name, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func established(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}
