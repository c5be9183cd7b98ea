package kubernetes

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestNewClientKubeconfig: a client built from a kubeconfig talks to the
// server it names (a real HTTP server on 127.0.0.1 answering like the API).
func TestNewClientKubeconfig(t *testing.T) {
	var path, agent string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path, agent = r.URL.Path, r.UserAgent()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"kind":"NodeList","apiVersion":"v1","items":[{"metadata":{"name":"n1"}}]}`))
	}))
	defer srv.Close()
	kubeconfig := filepath.Join(t.TempDir(), "config")
	conf := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: " + srv.URL +
		"\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user:\n    token: t\n"
	if err := os.WriteFile(kubeconfig, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := NewClient(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) != 1 || nodes.Items[0].Name != "n1" {
		t.Fatalf("List = %v, %v", nodes, err)
	}
	if path != "/api/v1/nodes" || agent != "loctree-agent" {
		t.Errorf("request %s with user agent %q", path, agent)
	}
}

func TestNewClientErrors(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	if _, err := NewClient(""); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "kubeconfig") {
		t.Errorf("outside a cluster: %v", err)
	}
	if _, err := NewClient(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, ErrConfig) {
		t.Errorf("missing kubeconfig: %v", err)
	}
}
