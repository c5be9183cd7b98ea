package kubernetes

import (
	"testing"
	"time"
)

// TestRetryBackoffBounded: however many retries in a row, none waits
// more than the 1 s cap doubled by jitter, and the first waits at most
// 200 ms (client-go's default: 0.8–1.6 s first, up to 60 s).
func TestRetryBackoffBounded(t *testing.T) {
	b := retryBackoff()
	for i := range 1000 {
		d := b.Step()
		if limit := 2 * time.Second; i == 0 && d > 200*time.Millisecond || d > limit {
			t.Fatalf("retry %d waits %v", i, d)
		}
	}
}

// TestRetryBackoffSpread: once at the cap, waits are spread evenly over
// [1 s, 2 s) — each tenth of it holds 10 ± 2 % of 20,000 waits — so that
// agents that lost the API server at the same moment come back spread
// over a second, not in step. Without jitter, or with half of it, the
// upper tenths stay empty.
func TestRetryBackoffSpread(t *testing.T) {
	b := retryBackoff()
	for range 10 {
		b.Step() // reach the cap
	}
	const n = 20000
	var bins [10]int
	for range n {
		d := b.Step()
		if d < time.Second || d >= 2*time.Second {
			t.Fatalf("a wait at the cap of %v, want within [1s, 2s)", d)
		}
		bins[(d-time.Second)*10/time.Second]++
	}
	for i, c := range bins {
		if c < n*8/100 || c > n*12/100 {
			t.Errorf("waits in [%v, %v): %d of %d, want 10 ± 2 %%", time.Second+time.Duration(i)*100*time.Millisecond, time.Second+time.Duration(i+1)*100*time.Millisecond, c, n)
		}
	}
}
