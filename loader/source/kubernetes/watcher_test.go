package kubernetes

import (
	"testing"
	"time"
)

// TestRetryBackoffBounded: however many retries in a row, none waits
// more than the 1 s cap plus half of it in jitter, and the first waits at
// most 150 ms (client-go's default: 0.8–1.6 s first, up to 60 s).
func TestRetryBackoffBounded(t *testing.T) {
	b := retryBackoff()
	for i := range 1000 {
		d := b.Step()
		if limit := 1500 * time.Millisecond; i == 0 && d > 150*time.Millisecond || d > limit {
			t.Fatalf("retry %d waits %v", i, d)
		}
	}
}
