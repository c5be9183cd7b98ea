package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"time"

	"github.com/loctree/loctree/filter/internal/abi"
	"github.com/loctree/loctree/filter/shareddata"
	"github.com/loctree/loctree/shared"
	"github.com/loctree/loctree/shared/wire"
	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"
)

type vmContext struct{ types.DefaultVMContext }

// NewPluginContext creates the root context of this VM.
func (*vmContext) NewPluginContext(uint32) types.PluginContext {
	return &pluginContext{owner: rand.Uint64() | 1}
}

// pluginContext is the root context: configuration, the current tree and
// the fetch loop.
type pluginContext struct {
	types.DefaultPluginContext
	cfg      *Config
	loc      *sourceLocality
	cur      *treeState
	m        *metrics
	owner    uint64  // this VM's id in the fetch lease
	rejected version // the last shared tree this VM rejected: not read again
	fetching bool
	failing  bool // inside a failure streak (logged once)
	free     []*httpContext
	last     svcCache // the last service lookup
	scratch  []byte   // reused to build service lookup keys
}

// OnPluginStart parses the configuration; a bad one fails the plugin with
// one clear log line, as Envoy expects. A panic while starting fails the
// plugin the same way instead of trapping the VM.
func (p *pluginContext) OnPluginStart(size int) (status types.OnPluginStartStatus) {
	defer func() {
		if r := recover(); r != nil {
			abi.LogCritical(fmt.Sprintf("loctree: plugin start failed: internal error: %v", r))
			status = types.OnPluginStartStatusFailed
		}
	}()
	if err := checkConfigSize(size); err != nil {
		abi.LogCritical("loctree: plugin start failed: " + err.Error())
		return types.OnPluginStartStatusFailed
	}
	return p.start()
}

func (p *pluginContext) start() types.OnPluginStartStatus {
	data, err := abi.GetPluginConfiguration()
	if err != nil && !errors.Is(err, types.ErrorStatusNotFound) {
		abi.LogCritical("loctree: plugin start failed: read plugin configuration: " + err.Error())
		return types.OnPluginStartStatusFailed
	}
	cfg, err := parseConfig(data)
	if err != nil {
		abi.LogCritical("loctree: plugin start failed: " + err.Error())
		return types.OnPluginStartStatusFailed
	}
	p.cfg, p.loc, p.m = cfg, newSourceLocality(cfg.Locality), defineMetrics()
	p.m.traffic = newTraffic(cfg.TrafficScope, p.loc.value(cfg.TrafficScope))
	if cfg.Topology != nil {
		return p.startInline()
	}
	p.pickUp() // another VM may have fetched already
	// Tick fast until the first tree is in, then every refresh_ms.
	period := min(firstTreeTickMS, cfg.Tree.RefreshMS)
	if p.cur != nil {
		period = cfg.Tree.RefreshMS
	}
	if err := abi.SetTickPeriodMilliSeconds(uint32(period)); err != nil {
		abi.LogCritical("loctree: plugin start failed: set tick period: " + err.Error())
		return types.OnPluginStartStatusFailed
	}
	return types.OnPluginStartStatusOK
}

func (p *pluginContext) startInline() types.OnPluginStartStatus {
	t, err := shared.Build(p.cfg.Topology, shared.BuildOptions{Generation: 1, Warn: logWarning})
	if err != nil {
		abi.LogCritical("loctree: plugin start failed: inline topology: " + err.Error())
		return types.OnPluginStartStatusFailed
	}
	p.install(t, "")
	p.publish(t.Bytes())
	p.cfg.Topology = nil // the tree is built: free the parsed topology
	collect()
	if err := abi.SetTickPeriodMilliSeconds(metricsFlushMS); err != nil {
		abi.LogCritical("loctree: plugin start failed: set tick period: " + err.Error())
		return types.OnPluginStartStatusFailed
	}
	return types.OnPluginStartStatusOK
}

// logWarning logs a warning of the inline topology (the agent logs those
// of the trees it serves).
func logWarning(w shared.Warning) {
	abi.LogWarn("loctree: inline topology: warning: " + w.String())
}

// firstTreeTickMS is the tick period of an agent-fed plugin until its
// first tree is installed.
const firstTreeTickMS = 200

// metricsFlushMS is the tick period of an inline-topology plugin, which
// ticks only to flush its counters.
const metricsFlushMS = 1000

// NewHttpContext creates a stream context, reusing finished ones so that a
// request allocates nothing in the VM.
func (p *pluginContext) NewHttpContext(uint32) types.HttpContext {
	if n := len(p.free); n > 0 {
		h := p.free[n-1]
		p.free = p.free[:n-1]
		h.p = p
		return h
	}
	return &httpContext{p: p}
}

// OnTick picks up a newer shared tree and, if this VM holds the fetch
// lease, asks the agent for a new one.
func (p *pluginContext) OnTick() {
	p.m.flush()
	if p.cfg.Tree == nil {
		return
	}
	p.pickUp()
	if !p.fetching && p.acquireLease() {
		p.fetch()
	}
}

// install makes t the VM's tree.
func (p *pluginContext) install(t *shared.Tree, etag string) {
	if p.cur == nil && p.cfg.Tree != nil && p.cfg.Tree.RefreshMS > firstTreeTickMS {
		abi.SetTickPeriodMilliSeconds(uint32(p.cfg.Tree.RefreshMS))
	}
	p.cur, p.last = newTreeState(t, p.loc), svcCache{} // the cache holds the old tree
	p.cur.etag = etag
	abi.SetGauge(p.m.generation, int64(t.Generation()))
}

// drop releases the installed tree and all the VM derived from it; the
// caller collects before a new tree's blob is read into the VM, so that
// blob and its index reuse the old tree's memory and an update peaks at
// one tree, not two (a VM's linear memory never shrinks; docs/WASM.md,
// "Memory at mesh scale"). The collection runs in the caller, not here:
// run inside drop, it left the old tree alive (measured: the linear memory
// grew by a blob in TestVMMemoryTreeUpdate). If the new tree is rejected,
// restore installs the last good one again from shared data. The old tree
// stays alive while streams in flight hold it (they release their
// in-flight counts on it).
func (p *pluginContext) drop() (etag string) {
	if p.cur == nil {
		return ""
	}
	etag = p.cur.etag
	p.cur, p.last = nil, svcCache{}
	return etag
}

// restore installs the first of keys whose shared tree decodes: the last
// good tree, after drop released it for a tree that was rejected. Shared
// data holds only trees that decoded in the VM that published them (a
// fetched tree is published after it is installed), and the previous one
// under shareddata.PreviousTree.
func (p *pluginContext) restore(etag string, keys ...string) {
	collect() // the rejected blob
	for _, key := range keys {
		blob, _, err := abi.GetSharedData(key)
		if err != nil {
			continue
		}
		if t, err := shared.Decode(blob); err == nil {
			p.install(t, etag)
			return
		}
		collect()
	}
	abi.LogCritical("loctree: no good tree left in shared data to restore; passing requests through")
}

// collect frees what an install left behind (the old tree, a parsed
// topology, the copy of the shared blob publish compares) now, not when the
// heap next reaches twice its size: a VM's linear memory never shrinks, so
// the next tree should find that memory free. It also finishes a
// collection the install's allocations started, which a reactor would
// otherwise leave in its mark phase, write barriers on, until the next tick
// (abi's finishGC; docs/WASM.md, "Memory at mesh scale"). It costs one full
// collection per tree installed.
func collect() { runtime.GC() }

// pickUp installs the shared tree when its version differs from ours,
// releasing ours first (drop); if the shared tree is rejected, the previous
// one (the last good) is restored from shared data.
func (p *pluginContext) pickUp() {
	g, _, err := abi.GetSharedData(shareddata.Generation)
	if err != nil || len(g) != len(version{}) || version(g) == p.cur.version() || version(g) == p.rejected {
		return // a key of another length: a build that names versions otherwise
	}
	if f := version(g).format(); f != shared.FormatVersion {
		return // a build of another tree format published it: keep ours, whole
	}
	had := p.cur != nil
	etag := p.drop()
	if had {
		collect()
	}
	blob, _, err := abi.GetSharedData(shareddata.Tree)
	if err == nil {
		var t *shared.Tree
		if t, err = shared.Decode(blob); err == nil {
			p.install(t, "")
			collect()
			return
		}
		p.rejected = version(g)
		abi.LogError("loctree: shared tree rejected: " + err.Error())
	}
	if had {
		p.restore(etag, shareddata.PreviousTree)
	}
}

// publish stores blob in shared data unless its version is already there,
// and the tree it replaces under shareddata.PreviousTree (for a VM that
// rejects blob to restore); compare-and-swap makes concurrent publishers
// safe. A lower generation is published too: the agent's tree is the
// truth, and an agent started afresh (after uninstall) numbers its trees
// from 1 again.
func (p *pluginContext) publish(blob []byte) {
	ver := blobVersion(blob)
	for range 3 {
		cur, cas, err := abi.GetSharedData(shareddata.Tree)
		if err != nil && !errors.Is(err, types.ErrorStatusNotFound) {
			return
		}
		if err == nil && blobVersion(cur) == ver {
			return
		}
		if len(cur) > 0 {
			abi.SetSharedData(shareddata.PreviousTree, cur, 0)
		}
		err = abi.SetSharedData(shareddata.Tree, blob, cas)
		if err == nil {
			abi.SetSharedData(shareddata.Generation, ver[:], 0)
			return
		}
		if !errors.Is(err, types.ErrorStatusCasMismatch) {
			abi.LogError("loctree: publish tree: " + err.Error())
			return
		}
	}
}

// acquireLease makes this VM the fetcher unless another VM holds an
// unexpired lease.
func (p *pluginContext) acquireLease() bool {
	now := time.Now().UnixNano()
	cur, cas, err := abi.GetSharedData(shareddata.FetchLease)
	switch {
	case err == nil && len(cur) == 16:
		if owner, exp := binary.LittleEndian.Uint64(cur), int64(binary.LittleEndian.Uint64(cur[8:])); owner != p.owner && exp > now {
			return false
		}
	case err != nil && !errors.Is(err, types.ErrorStatusNotFound):
		return false
	}
	exp := now + 3*int64(p.cfg.Tree.RefreshMS)*int64(time.Millisecond)
	v := binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, p.owner), uint64(exp))
	return abi.SetSharedData(shareddata.FetchLease, v, cas) == nil
}

func (p *pluginContext) fetch() {
	src := p.cfg.Tree
	headers := [][2]string{{":method", "GET"}, {":path", src.Path}, {":authority", src.Authority}, {"accept", "application/octet-stream"}}
	if p.cur != nil {
		etag := p.cur.etag
		if etag == "" {
			etag = strconv.Quote(strconv.FormatUint(p.cur.generation(), 10))
		}
		headers = append(headers, [2]string{"if-none-match", etag})
	}
	if _, err := abi.DispatchHttpCall(src.Cluster, headers, nil, nil, uint32(src.TimeoutMS), p.onTree); err != nil {
		p.fail("dispatch tree fetch to cluster " + src.Cluster + ": " + err.Error())
		return
	}
	p.fetching = true
}

// onTree handles the tree server's answer.
func (p *pluginContext) onTree(numHeaders, bodySize, _ int) {
	p.fetching = false
	if numHeaders == 0 {
		p.fail("tree fetch failed (no response)")
		return
	}
	headers, err := abi.GetHttpCallResponseHeaders()
	if err != nil {
		p.fail("tree fetch: read headers: " + err.Error())
		return
	}
	status, etag := header(headers, ":status"), header(headers, "etag")
	switch status {
	case "304":
		p.ok()
	case "200":
		p.accept(bodySize, etag)
	default:
		p.fail("tree fetch: HTTP status " + status)
	}
}

// accept installs and publishes a fetched tree. The VM releases its own
// tree before it reads the body (drop), unless the body's header names
// the tree it holds (a 200 where a 304 was due: compared whole, once, with
// both in memory).
func (p *pluginContext) accept(bodySize int, etag string) {
	head, err := abi.GetHttpCallResponseBody(0, min(bodySize, wire.HeaderSize))
	if err != nil {
		p.fail("tree fetch: read body: " + err.Error())
		return
	}
	if p.cur != nil && blobVersion(head) == p.cur.version() {
		p.acceptSame(bodySize, etag)
		return
	}
	if !shared.IsEncoded(head) || blobVersion(head).format() != shared.FormatVersion { // keep ours, whole
		p.fail(fmt.Sprintf("corrupt tree rejected: not a tree of format version %d", shared.FormatVersion))
		return
	}
	had := p.cur != nil
	oldETag := p.drop()
	if had {
		collect()
	}
	cas, copied := keepPrevious()
	if copied {
		collect()
	}
	t, err := readTree(bodySize)
	if err != nil {
		if had {
			p.restore(oldETag, shareddata.Tree, shareddata.PreviousTree)
		}
		p.fail(err.Error())
		return
	}
	p.install(t, etag)
	collect()
	p.publishAt(t.Bytes(), cas)
	abi.LogInfo(fmt.Sprintf("loctree: installed tree generation %d (%d services)", t.Generation(), t.NumServices()))
	p.ok()
}

// keepPrevious copies the shared tree to shareddata.PreviousTree, for a VM
// that rejects the tree about to be published, and returns its CAS token
// for publishAt; copied says the caller has a copy to collect. It runs
// while the fetching VM holds no tree, so the copy takes the dropped
// tree's memory, not more.
func keepPrevious() (cas uint32, copied bool) {
	cur, cas, err := abi.GetSharedData(shareddata.Tree)
	if err != nil || len(cur) == 0 {
		return cas, false
	}
	abi.SetSharedData(shareddata.PreviousTree, cur, 0)
	return cas, true
}

// publishAt publishes blob where the shared tree's CAS token is still cas,
// without copying the shared tree into the VM (its version is compared
// under shareddata.Generation); if another VM published since, publish
// compares and retries.
func (p *pluginContext) publishAt(blob []byte, cas uint32) {
	ver := blobVersion(blob)
	if g, _, err := abi.GetSharedData(shareddata.Generation); err == nil && len(g) == len(ver) && version(g) == ver {
		return
	}
	if abi.SetSharedData(shareddata.Tree, blob, cas) == nil {
		abi.SetSharedData(shareddata.Generation, ver[:], 0)
		return
	}
	p.publish(blob)
	collect() // the copy of the shared tree publish compared
}

// readTree reads the fetched body into the VM and decodes it in place.
func readTree(bodySize int) (*shared.Tree, error) {
	body, err := abi.GetHttpCallResponseBody(0, bodySize)
	if err != nil {
		return nil, errors.New("tree fetch: read body: " + err.Error())
	}
	t, err := shared.Decode(body)
	if err != nil {
		return nil, errors.New("corrupt tree rejected: " + err.Error())
	}
	return t, nil
}

// acceptSame handles a 200 whose header names the installed tree: the
// ETag is kept if the body is that tree, byte for byte; otherwise it is
// corrupt.
func (p *pluginContext) acceptSame(bodySize int, etag string) {
	body, err := abi.GetHttpCallResponseBody(0, bodySize)
	if err != nil {
		p.fail("tree fetch: read body: " + err.Error())
		return
	}
	if !bytes.Equal(body, p.cur.tree.Bytes()) {
		if _, err = shared.Decode(body); err == nil {
			err = errors.New("the installed tree's generation and checksum, other content")
		}
		p.fail("corrupt tree rejected: " + err.Error())
		return
	}
	p.cur.etag = etag
	p.ok()
}

// fail counts a failed fetch and logs once per failure streak; the last
// good tree stays installed.
func (p *pluginContext) fail(msg string) {
	p.m.fetchFailures.Increment(1)
	if !p.failing {
		abi.LogWarn(fmt.Sprintf("loctree: %s; keeping tree generation %d", msg, p.cur.generation()))
	}
	p.failing = true
}

func (p *pluginContext) ok() {
	if p.failing {
		abi.LogInfo("loctree: tree fetch recovered")
	}
	p.failing = false
}

func header(h [][2]string, key string) string {
	for _, kv := range h {
		if kv[0] == key {
			return kv[1]
		}
	}
	return ""
}
