package kernel

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cilium/ebpf"
)

// A connect copies its service's value and then walks the node and endpoint
// regions that copy names, inside one RCU read-side section: the cgroup
// socket hooks run under rcu_read_lock (kernel/bpf/cgroup.c,
// bpf_prog_run_array_cg), and with preemptible RCU (CONFIG_PREEMPT_RCU) the
// walk can be preempted half way. The installer publishes a changed service
// by replacing its value, so the old regions have no new readers; they may
// be handed to another service only once every reader that could still hold
// the old copy has left its read-side section: after an RCU grace period
// that began after the replacement.
//
// User space cannot call synchronize_rcu, but the kernel calls it for us:
// an update of a map-in-map returns only after synchronize_rcu
// (kernel/bpf/syscall.c, map_update_elem -> maybe_wait_bpf_programs, which
// waits "for any running non-sleepable BPF programs to complete"); the BPF
// selftests' kern_sync_rcu (tools/testing/selftests/bpf/testing_helpers.c)
// relies on the same. A grace period costs milliseconds (about 8 ms at
// HZ=250), so the installer does not wait for one per Apply: retired
// regions queue behind the next grace period, which one goroutine runs in
// the background, one at a time, covering everything retired before it
// began. Apply waits only when it needs the space.

// grace runs RCU grace periods in the background and tells which have ended.
// Grace periods are numbered 1, 2, ... in the order they begin.
type grace struct {
	sync func() error // one synchronize_rcu
	log  *slog.Logger

	mu      sync.Mutex
	cond    *sync.Cond
	want    uint64 // highest grace period asked for
	started uint64 // highest grace period begun
	done    uint64 // highest grace period ended
	closed  bool
	exited  chan struct{} // closed when run returns
}

func newGrace(synchronize func() error, log *slog.Logger) *grace {
	g := &grace{sync: synchronize, log: log, exited: make(chan struct{})}
	g.cond = sync.NewCond(&g.mu)
	go g.run()
	return g
}

// next asks for a grace period that begins after now and returns its
// number: a region retired now may be reused once it has ended.
func (g *grace) next() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := g.started + 1
	g.want = max(g.want, n)
	g.cond.Broadcast()
	return n
}

// ended reports whether grace period n has ended.
func (g *grace) ended(n uint64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.done >= n
}

// wait blocks until grace period n has ended. It reports false if g was
// closed first.
func (g *grace) wait(n uint64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.done < n && !g.closed {
		g.cond.Wait()
	}
	return g.done >= n
}

func (g *grace) run() {
	defer close(g.exited)
	g.mu.Lock()
	defer g.mu.Unlock()
	for {
		for g.want <= g.started && !g.closed {
			g.cond.Wait()
		}
		if g.closed {
			return
		}
		g.started++
		n, sync := g.started, g.sync
		g.mu.Unlock()
		ok := g.synchronize(sync)
		g.mu.Lock()
		if !ok {
			return
		}
		g.done = n
		g.cond.Broadcast()
	}
}

// synchronize runs one grace period, retrying until the kernel accepts it
// (a region must never be reused on a guess) or g is closed.
func (g *grace) synchronize(sync func() error) bool {
	for {
		err := sync()
		if err == nil {
			return true
		}
		g.log.Error("cannot wait for an RCU grace period; retired regions stay unused", "err", err)
		time.Sleep(100 * time.Millisecond)
		g.mu.Lock()
		closed := g.closed
		g.mu.Unlock()
		if closed {
			return false
		}
	}
}

// setSync replaces the grace-period function (tests remove the grace period
// to show what it prevents).
func (g *grace) setSync(f func() error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sync = f
}

// close stops the background goroutine and returns once it has stopped
// (after a grace period in flight), so the kernel objects it uses can go.
func (g *grace) close() {
	g.mu.Lock()
	g.closed = true
	g.cond.Broadcast()
	g.mu.Unlock()
	<-g.exited
}

// rcuSync is a map-in-map whose update makes the kernel run
// synchronize_rcu before the syscall returns.
type rcuSync struct {
	outer, inner *ebpf.Map
}

func newRCUSync() (*rcuSync, error) {
	innerSpec := &ebpf.MapSpec{Name: "lt_rcu_inner", Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1}
	inner, err := ebpf.NewMap(innerSpec)
	if err != nil {
		return nil, fmt.Errorf("create grace-period map: %w", err)
	}
	outer, err := ebpf.NewMap(&ebpf.MapSpec{Name: "lt_rcu_sync", Type: ebpf.ArrayOfMaps, KeySize: 4, ValueSize: 4, MaxEntries: 1, InnerMap: innerSpec})
	if err != nil {
		inner.Close()
		return nil, fmt.Errorf("create grace-period map: %w", err)
	}
	return &rcuSync{outer: outer, inner: inner}, nil
}

// synchronize returns after an RCU grace period.
func (r *rcuSync) synchronize() error {
	if err := r.outer.Put(uint32(0), r.inner); err != nil {
		return fmt.Errorf("update grace-period map: %w", err)
	}
	return nil
}

func (r *rcuSync) close() {
	r.outer.Close()
	r.inner.Close()
}
