package ticker

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestEvery: f runs at the interval and not after ctx ends.
func TestEvery(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int32
	done := make(chan struct{})
	go func() {
		Every(ctx, time.Millisecond, func() {
			if n.Add(1) == 5 {
				cancel()
			}
		})
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Every did not return after its context ended")
	}
	if got := n.Load(); got != 5 {
		t.Fatalf("f ran %d times, want 5 (none after the cancel)", got)
	}
}
