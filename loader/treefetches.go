package loader

import (
	"net/http"
	"strconv"
	"sync/atomic"
)

// treeFetches counts the answers to /v1/tree by status code. The filters in
// the node's proxies poll it (every refresh_ms, 5 s as shipped), so a rate of
// zero on a node with meshed pods means no filter runs there: for example a
// WasmPlugin whose module could not be pulled, which Istio replaces with an
// allow-all filter without any other sign.
type treeFetches struct {
	byCode [len(fetchCodes)]atomic.Uint64
}

// fetchCodes are the codes the tree server answers with; "other" counts the rest.
var fetchCodes = [...]string{"200", "304", "503", "other"}

// count wraps the tree server's handler.
func (f *treeFetches) count(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(sw, r)
		f.byCode[fetchIndex(sw.code)].Add(1)
	})
}

func fetchIndex(code int) int {
	for i, c := range fetchCodes[:len(fetchCodes)-1] {
		if c == strconv.Itoa(code) {
			return i
		}
	}
	return len(fetchCodes) - 1
}

func (f *treeFetches) write(pw *promWriter) {
	vs := make([]labeledValue, len(fetchCodes))
	for i, c := range fetchCodes {
		vs[i] = labeledValue{Label: c, V: float64(f.byCode[i].Load())}
	}
	pw.Labeled("loctree_tree_requests_total", "counter", "Requests to /v1/tree by status code (200 tree sent, 304 unchanged, 503 no tree yet): the proxies' filters polling. Zero on a node with meshed pods means no filter runs there.", "code", vs)
}

// statusWriter remembers the status code a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}
