package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
)

// maxBody is the largest request or response body the proxy forwards. The
// host hands the filter whole bodies, so bodies are buffered; a bigger one
// is refused (413 for a request, 502 for a response), never cut.
const maxBody = 16 << 20

// defaultMaxBuffered bounds the body bytes held at once, per direction.
const defaultMaxBuffered = 4 * maxBody

var (
	errBodyTooLarge = fmt.Errorf("body over the %d-byte limit of wasm serve", maxBody)
	errBusy         = errors.New("wasm serve holds its limit of buffered bodies and none was freed in time; retry")
)

// bodyBudget is a byte budget for bodies held in memory. A body reserves
// its whole size (its Content-Length, else maxBody) before it is read and
// waits, up to its request's deadline, until that much is free: requests
// beyond the budget queue instead of growing memory, and no request holds
// part of what it needs while waiting for the rest.
type bodyBudget struct {
	mu   sync.Mutex
	free int64
	wake chan struct{} // closed and replaced when bytes are given back
}

func newBodyBudget(max int64) *bodyBudget {
	return &bodyBudget{free: max, wake: make(chan struct{})}
}

func (b *bodyBudget) take(ctx context.Context, n int64) error {
	for {
		b.mu.Lock()
		if n <= b.free {
			b.free -= n
			b.mu.Unlock()
			return nil
		}
		wake := b.wake
		b.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return errBusy
		}
	}
}

func (b *bodyBudget) give(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.free += n
	close(b.wake)
	b.wake = make(chan struct{})
	b.mu.Unlock()
}

// readBody reads r whole, up to maxBody bytes, once its size is reserved in
// b. held is what stays reserved, for the caller to give back when done.
func readBody(ctx context.Context, r io.Reader, size int64, b *bodyBudget) (body []byte, held int64, err error) {
	if size > maxBody {
		return nil, 0, errBodyTooLarge
	}
	want := size
	if size < 0 { // unknown length: reserve the most, keep what is read
		want = maxBody
	}
	if err := b.take(ctx, want); err != nil {
		return nil, 0, err
	}
	body, err = io.ReadAll(io.LimitReader(r, want+1))
	switch {
	case int64(len(body)) > want:
		err = errBodyTooLarge
	case err == nil:
		b.give(want - int64(len(body)))
		return body, int64(len(body)), nil
	}
	b.give(want)
	return nil, 0, err
}
