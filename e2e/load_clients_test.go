package e2e

import (
	"context"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"
)

// requestTimeout bounds one client request; past it the request is an
// error.
const requestTimeout = 5 * time.Second

// zoneStats are the outcomes of one zone's clients in one run.
type zoneStats struct {
	mu      sync.Mutex
	sent    int
	failed  int             // not answered 200 (503, 502, timeout, ...)
	reached int             // answered by a backend, 200 or 503
	local   int             // answered by a backend of the client's zone
	latency []time.Duration // of the 200s, from the scheduled arrival
}

func (s *zoneStats) add(lat time.Duration, status int, local, reached bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent++
	if status != http.StatusOK {
		s.failed++
	} else {
		s.latency = append(s.latency, lat)
	}
	if reached {
		s.reached++
	}
	if local {
		s.local++
	}
}

// offer sends Poisson arrivals at rate per second for d, each request in
// its own goroutine (open loop: a slow answer does not hold back the next
// arrival), and returns when every request sent has its outcome. Latency
// is measured from the arrival's scheduled time, so a late start counts.
func offer(ctx context.Context, sc *loadScenario, zone int, send sendFunc, rate float64, d time.Duration, rng *rand.Rand, into *zoneStats) {
	var wg sync.WaitGroup
	start := time.Now()
	for at := time.Duration(0); ; {
		at += time.Duration(rng.ExpFloat64() / rate * float64(time.Second))
		if at >= d {
			break
		}
		due := start.Add(at)
		time.Sleep(time.Until(due))
		wg.Add(1)
		go func() {
			defer wg.Done()
			rctx, cancel := context.WithTimeout(ctx, requestTimeout)
			defer cancel()
			status, backend, err := send(rctx)
			if err != nil {
				status = 0
			}
			z := sc.zoneOf(backend)
			into.add(time.Since(due), status, z == zone, z >= 0)
		}()
	}
	wg.Wait()
}

// newRand is a seeded source of arrivals: every run of a zone offers the
// same arrival times.
func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 25)) }

// quantile is the q-quantile of the answered requests' latency: of n, the
// (⌊q·n⌋+1)-th smallest (the last for q = 1); 0 with none.
func (s *zoneStats) quantile(q float64) time.Duration {
	if len(s.latency) == 0 {
		return 0
	}
	l := slices.Clone(s.latency)
	slices.Sort(l)
	return l[min(len(l)-1, int(q*float64(len(l))))]
}

// errorRate is the share of the requests sent not answered 200.
func (s *zoneStats) errorRate() float64 { return ratio(s.failed, s.sent) }

// localShare is the share of the requests a backend answered that a
// backend of the client's own zone answered.
func (s *zoneStats) localShare() float64 { return ratio(s.local, s.reached) }

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
