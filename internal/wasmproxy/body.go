package wasmproxy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
)

// maxBody is the largest request or response body the proxy forwards. The
// host hands the filter whole bodies, so bodies are buffered; a bigger one
// is refused (413 for a request, 502 for a response), never cut.
const maxBody = 16 << 20

// defaultMaxBuffered bounds the body bytes held by all requests at once.
const defaultMaxBuffered = 4 * maxBody

var (
	errBodyTooLarge = fmt.Errorf("body over the %d-byte limit of wasm serve", maxBody)
	errBusy         = errors.New("wasm serve is holding its limit of buffered bodies; retry")
)

// bodyBudget counts body bytes held in memory across requests.
type bodyBudget struct {
	used atomic.Int64
	max  int64
}

func (b *bodyBudget) take(n int64) bool {
	if b.used.Add(n) > b.max {
		b.used.Add(-n)
		return false
	}
	return true
}

func (b *bodyBudget) give(n int64) { b.used.Add(-n) }

// readBody reads r whole, up to maxBody bytes, taking every byte from b
// before holding it. held is what the caller gives back to b when done,
// whatever the error.
func readBody(r io.Reader, size int64, b *bodyBudget) (body []byte, held int64, err error) {
	if size > maxBody {
		return nil, 0, errBodyTooLarge
	}
	var buf bytes.Buffer
	chunk := make([]byte, 32<<10)
	for {
		n, rerr := r.Read(chunk)
		if buf.Len()+n > maxBody {
			return nil, held, errBodyTooLarge
		}
		if !b.take(int64(n)) {
			return nil, held, errBusy
		}
		held += int64(n)
		buf.Write(chunk[:n])
		if errors.Is(rerr, io.EOF) {
			return buf.Bytes(), held, nil
		}
		if rerr != nil {
			return nil, held, rerr
		}
	}
}
