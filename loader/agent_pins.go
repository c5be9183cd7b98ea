package loader

import (
	"context"

	"github.com/loctree/loctree/internal/ticker"
)

// guardPinsFrom checks the pins every watch interval until ctx is done.
func (a *agent) guardPinsFrom(ctx context.Context) {
	a.background.Go(func() { ticker.Every(ctx, a.cfg.Watch, a.checkPins) })
}

// checkPins checks the pins once, and keeps pinsOK, /healthz and the
// loctree_pins_ok metric true to what it finds.
func (a *agent) checkPins() {
	err := a.in.CheckPins()
	switch ok := err == nil; {
	case !ok && a.pinsOK.Load():
		a.log.Error("the kernel path is not pinned: it stops when this agent exits; /healthz reports 503", "err", err)
	case ok && !a.pinsOK.Load():
		a.log.Info("pins restored; healthy again", "bpffs", a.cfg.BPFFS)
	}
	a.pinsOK.Store(err == nil)
	a.metrics.setPins(err == nil)
}
