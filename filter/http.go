package main

import (
	"encoding/base64"
	"fmt"

	"github.com/loctree/loctree/filter/internal/abi"
	"github.com/loctree/loctree/shared"
	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"
)

// hashKeyHeader carries the consistent-hash key of a request.
const hashKeyHeader = "x-loctree-hash-key"

var (
	clusterNamePath   = []string{"xds", "cluster_name"}
	sourceAddressPath = []string{"source", "address"}
)

// httpContext is one request.
type httpContext struct {
	types.DefaultHttpContext
	p        *pluginContext
	st       *treeState // the tree the pick came from
	inflight uint32
	counted  bool
}

// OnHttpRequestHeaders picks the endpoint and writes the header. A panic
// is logged and the request passes through: a filter fault never fails
// the proxy.
func (h *httpContext) OnHttpRequestHeaders(int, bool) (action types.Action) {
	defer func() {
		if r := recover(); r != nil {
			abi.LogError(fmt.Sprintf("loctree: internal error, request passed through: %v", r))
			action = types.ActionContinue
		}
	}()
	p := h.p
	cfg := p.cfg
	st := p.cur
	if st == nil {
		p.m.passthrough++
		abi.RemoveHttpRequestHeader(cfg.Header) // a client-supplied value is never kept
		if cfg.FailClosed {
			return h.reject("loctree: no locality tree loaded yet (fail_closed)")
		}
		return types.ActionContinue
	}
	key, fromCluster := serviceKey()
	svc := p.service(st, key, fromCluster)
	if svc == nil {
		p.m.unknown++
		abi.RemoveHttpRequestHeader(cfg.Header)
		return types.ActionContinue
	}
	if l := st.loads[svc.Index()]; l != nil {
		return h.chooseLoads(st, svc, l)
	}
	r := st.lookup(svc)
	if r.Len() == 0 {
		p.m.noCandidate++
		p.counts(svc).noCandidate++
		abi.RemoveHttpRequestHeader(cfg.Header)
		if svc.Mode() == shared.ModeStrict {
			return h.reject(fmt.Sprintf("loctree: no endpoint of %s in this locality (strict mode)", svc.Name()))
		}
		if r.Depth < svc.MinRank() {
			return h.reject(fmt.Sprintf("loctree: no endpoint of %s within its failover_limit %s", svc.Name(), svc.Scope(svc.MinRank()-1)))
		}
		return types.ActionContinue
	}
	h.choose(st, svc, r) // replaces any client-supplied value
	return types.ActionContinue
}

// choose picks in r, widened under load for a load_aware service (the
// in-flight counts are this VM's: docs/WASM.md, "Load-aware widening").
func (h *httpContext) choose(st *treeState, svc *shared.Service, r shared.Range) {
	key, hasKey := h.hashKey(svc)
	r = st.picker.Widen(svc, r)
	h.write(st, svc, r, st.pick(svc, r, key, hasKey), r.Depth)
}

// chooseLoads picks by the proxy's priority loads of a spillover service
// (computed once per tree). Fallbacks, when configured, come from the
// source's nearest eligible endpoints (the lookup's range), or with
// distribute rules from the pick's target's eligible endpoints. With nothing to
// pick (no endpoint, or Envoy's "no host" when the load falls on an empty
// set) the request passes without the header, as a failover miss does.
func (h *httpContext) chooseLoads(st *treeState, svc *shared.Service, l *shared.Loads) types.Action {
	key, hasKey := h.hashKey(svc)
	ep, ok := st.pickLoads(svc, l, key, hasKey)
	if !ok {
		h.p.m.noCandidate++
		h.p.counts(svc).noCandidate++
		abi.RemoveHttpRequestHeader(h.p.cfg.Header)
		return types.ActionContinue
	}
	var r shared.Range
	switch {
	case h.p.cfg.Fallbacks == 0:
	case l.NTargets > 0:
		r, _ = l.TargetRange(ep)
	default:
		r = st.lookup(svc)
	}
	depth := 0
	if p := l.Priority(ep); p >= 0 {
		depth = int(l.Rank[p])
		h.p.m.priorities[p]++
	}
	h.write(st, svc, r, ep, depth)
	return types.ActionContinue
}

// write sets the header to ep (and fallbacks from r) and counts the pick
// at depth.
func (h *httpContext) write(st *treeState, svc *shared.Service, r shared.Range, ep uint32, depth int) {
	cfg := h.p.cfg
	var value string
	if cfg.HeaderFormat == "base64" {
		value = base64.StdEncoding.EncodeToString([]byte(st.addr(ep)))
	} else {
		value = st.addr(ep)
		for _, f := range fallbacks(r, ep, cfg.Fallbacks) {
			value += "," + st.addr(f)
		}
	}
	abi.ReplaceHttpRequestHeader(cfg.Header, value)
	h.p.m.picks[depth]++
	h.p.counts(svc).picks[depth]++
	st.countTraffic(h.p.m.traffic, svc, ep, depth)
	if countsInFlight(svc) {
		st.picker.Inc(ep)
		h.st, h.inflight, h.counted = st, ep, true
	}
}

// countsInFlight says svc reads the in-flight counts that Inc and Done
// keep (its policy, or load-aware widening); the others skip both.
func countsInFlight(svc *shared.Service) bool {
	_, _, loadAware := svc.LoadAware()
	pol := svc.Policy()
	return loadAware || pol == shared.PolicyLeastRequest || pol == shared.PolicyLeastConnections
}

// hashKey is the request's consistent_hash key, hashed with shared.HashKey
// (pinned across VMs, restarts and releases, as `loctree tree pick --key`
// and the Go balancers hash it).
func (h *httpContext) hashKey(svc *shared.Service) (uint64, bool) {
	if svc.Policy() != shared.PolicyConsistentHash {
		return 0, false
	}
	if v, err := abi.GetHttpRequestHeader(hashKeyHeader); err == nil && v != "" {
		return shared.HashKey(v), true
	}
	if a, err := abi.GetPropertyString(sourceAddressPath); err == nil && a != "" {
		return shared.HashKey(shared.HostOf(a)), true
	}
	return 0, false
}

// serviceKey is what names the request's service: xds.cluster_name
// (fromCluster), else :authority. It is valid until the callback returns.
func serviceKey() (key string, fromCluster bool) {
	if c, err := abi.GetPropertyString(clusterNamePath); err == nil && c != "" {
		return c, true
	}
	a, _ := abi.GetHttpRequestHeader(":authority")
	return a, false
}

func (h *httpContext) reject(reason string) types.Action {
	abi.SendHttpResponse(503, [][2]string{{"content-type", "text/plain"}, {"x-loctree-reason", "no-candidate"}},
		[]byte(reason+"\n"), -1)
	return types.ActionPause
}

// OnHttpStreamDone releases the least-request in-flight count and recycles
// the context (the SDK calls nothing on it afterwards). A second call is a
// no-op.
func (h *httpContext) OnHttpStreamDone() {
	if h.p == nil {
		return
	}
	if h.counted {
		h.st.picker.Done(h.inflight)
	}
	p := h.p
	*h = httpContext{}
	p.free = append(p.free, h)
}
