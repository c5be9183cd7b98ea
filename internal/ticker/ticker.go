// Package ticker runs a function at an interval until a context ends: the
// agent's pin guard, the file source's poll and the demo's traffic and
// redraw loops.
package ticker

import (
	"context"
	"time"
)

// Every calls f every d until ctx is done; it returns then. The first call
// is d after the start.
func Every(ctx context.Context, d time.Duration, f func()) {
	tick := time.NewTicker(d)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			f()
		}
	}
}
