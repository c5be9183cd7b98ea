package loader

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/loctree/loctree/shared"
)

// TreeServer serves the current encoded tree at GET /v1/tree for the
// proxy-wasm filters. The ETag (see ETag) names the tree's generation and
// checksum; a request whose If-None-Match names it gets 304 Not Modified.
// Until a tree is set it answers 503.
type TreeServer struct {
	mu   sync.RWMutex
	blob []byte
	etag string
}

// Set makes t the served tree.
func (s *TreeServer) Set(t *shared.Tree) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.blob = t.Bytes()
	s.etag = ETag(t)
}

// ETag is the entity tag a tree is served with: its generation and its
// checksum, "GENERATION-CRC32C". The checksum matters when filters reach
// several agents through one Service: each agent numbers its generations
// itself, so the same number may name different content on two nodes.
func ETag(t *shared.Tree) string {
	return fmt.Sprintf(`"%d-%08x"`, t.Generation(), t.Checksum())
}

// ServeHTTP implements http.Handler.
func (s *TreeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	s.mu.RLock()
	blob, etag := s.blob, s.etag
	s.mu.RUnlock()
	if blob == nil {
		http.Error(w, "not ready: no tree installed and attached yet", http.StatusServiceUnavailable)
		return
	}
	h := w.Header()
	h.Set("ETag", etag)
	h.Set("Cache-Control", "no-cache")
	if etagMatch(r.Header.Get("If-None-Match"), etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Length", strconv.Itoa(len(blob)))
	if r.Method == http.MethodGet {
		w.Write(blob)
	}
}

// etagMatch reports whether an If-None-Match header names etag (weak
// comparison, "*" matches any).
func etagMatch(header, etag string) bool {
	for tag := range strings.SplitSeq(header, ",") {
		tag = strings.TrimPrefix(strings.TrimSpace(tag), "W/")
		if tag == "*" || tag == etag {
			return true
		}
	}
	return false
}
