package loader

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/loctree/loctree/internal/topology"
	"github.com/loctree/loctree/shared"
)

func TestTreeServer(t *testing.T) {
	ts := &TreeServer{}
	srv := httptest.NewServer(ts)
	defer srv.Close()
	get := func(inm string) (*http.Response, []byte) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/tree", nil)
		if inm != "" {
			req.Header.Set("If-None-Match", inm)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	if resp, _ := get(""); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("before a tree: %d, want 503", resp.StatusCode)
	}
	tree, err := shared.Build(topology.Default(), shared.BuildOptions{Generation: 42})
	if err != nil {
		t.Fatal(err)
	}
	ts.Set(tree)
	etag := ETag(tree)
	if want := fmt.Sprintf(`"42-%08x"`, tree.Checksum()); etag != want {
		t.Fatalf("ETag %s, want %s", etag, want)
	}
	tests := []struct {
		name, inm string
		status    int
		body      bool
	}{
		{"plain", "", 200, true},
		{"current", etag, 304, false},
		{"weak current", "W/" + etag, 304, false},
		{"list", `"41-00000000", ` + etag, 304, false},
		{"star", `*`, 304, false},
		{"stale", `"41-00000000"`, 200, true},
		{"same generation, other content", `"42-00000000"`, 200, true},
		{"generation only", `"42"`, 200, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, b := get(tt.inm)
			if resp.StatusCode != tt.status || resp.Header.Get("ETag") != etag {
				t.Fatalf("status %d etag %q, want %d %s", resp.StatusCode, resp.Header.Get("ETag"), tt.status, etag)
			}
			if tt.body && !bytes.Equal(b, tree.Bytes()) {
				t.Fatalf("body is not the tree (%d bytes)", len(b))
			}
			if !tt.body && len(b) != 0 {
				t.Fatalf("304 with a body")
			}
			if tt.body {
				if _, err := shared.Decode(b); err != nil {
					t.Fatalf("served tree does not decode: %v", err)
				}
			}
		})
	}
	resp, err := http.Post(srv.URL+"/v1/tree", "text/plain", nil)
	if err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %v %v", resp.StatusCode, err)
	}
}
