package demo

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/loctree/loctree/internal/ticker"
	"github.com/loctree/loctree/shared"
)

// run runs the phases, each a third of the duration: change the topology,
// wait until both planes hold the new tree, then send traffic and count.
func (d *demo) run(ctx context.Context) (*Summary, error) {
	sum := &Summary{Service: ServiceName, VIP: VIP}
	each := d.cfg.Duration / time.Duration(len(phases))
	var gen uint64
	for i, ph := range phases {
		if i > 0 && ph.fail != phases[i-1].fail {
			if err := os.WriteFile(d.topo, topologyJSON(ph.fail), 0o644); err != nil {
				return sum, err
			}
		}
		next, err := d.settle(ctx, gen)
		if err != nil {
			if ctx.Err() != nil {
				sum.Interrupted = true
				return sum, nil
			}
			return sum, err
		}
		gen = next
		res, err := d.newPhase(ph, gen)
		if err != nil {
			return sum, err
		}
		d.traffic(ctx, res, each)
		sum.Phases = append(sum.Phases, *res)
		if ctx.Err() != nil {
			sum.Interrupted = true
			return sum, nil
		}
		if d.cfg.View != nil && !d.cfg.Live {
			d.draw(d.cfg.View, res, i)
		}
	}
	sum.Traffic = d.settledTraffic(ctx, sum)
	if d.cfg.View != nil {
		drawSummary(d.cfg.View, sum)
	}
	return sum, nil
}

// settledTraffic reads both planes' counters once the filters have
// flushed every request the demo sent (on their tick; waitFor bounds the
// wait).
func (d *demo) settledTraffic(ctx context.Context, sum *Summary) Traffic {
	var sent uint64
	for _, ph := range sum.Phases {
		for _, s := range ph.Sources {
			sent += uint64(s.L7.Total)
		}
	}
	var t Traffic
	d.waitFor(ctx, d.agentRun, "the filters to flush their counters", func() bool {
		t = d.trafficNow()
		return t.L7.Total() >= sent
	})
	return t
}

// settle waits until the agent serves a generation after prev and every
// proxy's filter holds it; it returns that generation.
func (d *demo) settle(ctx context.Context, prev uint64) (uint64, error) {
	var gen uint64
	err := d.waitFor(ctx, d.agentRun, "the agent to install the new tree", func() bool {
		gen = agentGeneration(d.client, d.agent)
		return gen > prev
	})
	if err != nil {
		return 0, err
	}
	err = d.waitFor(ctx, d.agentRun, fmt.Sprintf("every proxy to fetch generation %d", gen), func() bool {
		for _, p := range d.proxies {
			if p.generation() != gen {
				return false
			}
		}
		return true
	})
	if err != nil {
		// The usual cause: a filter module built before this loctree, which
		// rejects the tree's format (its log says "format version").
		err = fmt.Errorf("%w (the filter logs why it rejects the tree; a module older than this loctree rejects its tree format %d: rebuild it with make wasm)", err, shared.FormatVersion)
	}
	return gen, err
}

func (d *demo) newPhase(ph phase, gen uint64) (*PhaseResult, error) {
	res := &PhaseResult{Name: ph.name, Description: ph.description, Generation: gen}
	top := Mesh(ph.fail)
	for _, s := range sources {
		cands, err := candidates(top, s.Locality)
		if err != nil {
			return nil, err
		}
		res.Sources = append(res.Sources, SourceResult{Source: s, Candidates: cands,
			Kernel: Spread{Endpoints: map[string]int{}, Localities: map[string]int{}},
			L7:     Spread{Endpoints: map[string]int{}, Localities: map[string]int{}}})
	}
	return res, nil
}

// traffic sends rounds of traffic for dur (or until ctx ends): per round,
// one kernel connection per source (one at a time: the process moves into
// the source's cgroup to dial) and one request per source through its
// proxy, all in parallel.
func (d *demo) traffic(ctx context.Context, res *PhaseResult, dur time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, dur)
	defer cancel()
	d.mu.Lock()
	d.cur = res
	d.mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(func() {
		ticker.Every(ctx, d.cfg.Interval, func() {
			for i, s := range sources {
				addr, err := d.askKernel(s)
				d.count(i, true, addr, err)
			}
		})
	})
	for i, p := range d.proxies {
		wg.Go(func() {
			ticker.Every(ctx, d.cfg.Interval, func() {
				addr, err := askProxy(d.client, p)
				d.count(i, false, addr, err)
			})
		})
	}
	if d.cfg.View != nil && d.cfg.Live {
		wg.Go(func() {
			ticker.Every(ctx, d.cfg.RedrawEvery, d.redraw)
			d.redraw()
		})
	}
	wg.Wait()
}

func (d *demo) count(i int, kernel bool, addr string, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := &d.cur.Sources[i]
	if kernel {
		s.Kernel.add(addr, err, s.Candidates)
	} else {
		s.L7.add(addr, err, s.Candidates)
	}
}
