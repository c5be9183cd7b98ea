/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The pick over the pick spans (lt_loads.pick): the service's policy
 * applied to several spans treated as one list, the last step of the
 * priority load and of distribute.
 */
#ifndef LOCTREE_LIB_SPANS_H
#define LOCTREE_LIB_SPANS_H

#include "common.h"
#include "maps.h"
#include "pick.h"
#include "affinity.h"
#include "loads.h"

/* lt_pick_nth_cb is one span of lt_pick_nth: the k-th and the k2-th
 * endpoint of the pick spans, one pass. */
static long lt_pick_nth_cb(__u64 i, void *data)
{
	struct lt_loads *l = ((struct lt_walk_ctx *)data)->l;
	__u32 n;

	if (i >= LT_PICK_SPANS)
		return 1;
	lt_bounded(i);
	n = lt_len(l->pick[i]);
	if (l->k < n && !l->at_found) {
		l->at = l->pick[i].lo + l->k;
		l->at_found = 1;
	}
	if (l->k2 < n && !l->at2_found) {
		l->at2 = l->pick[i].lo + l->k2;
		l->at2_found = 1;
	}
	l->k -= n;
	l->k2 -= n;
	return l->at_found && l->at2_found;
}

/* lt_pick_nth resolves positions k and k2 (each below the spans' total) of
 * the pick spans as one list into endpoints l->at and l->at2. */
static __always_inline void lt_pick_nth(struct lt_loads *l, struct lt_walk_ctx *c, __u32 k, __u32 k2)
{
	l->k = k;
	l->k2 = k2;
	l->at = 0;
	l->at2 = 0;
	l->at_found = 0;
	l->at2_found = 0;
	bpf_loop(LT_PICK_SPANS, lt_pick_nth_cb, c, 0);
}

/* lt_pick_first resolves positions a and b as lt_pick_nth does, without
 * its loop, when both lie in the first non-empty one of the first LT_SPANS
 * pick spans (a priority's own endpoints are often its second span: the
 * first is the empty range below the deepest match, priority.h); it
 * returns 0 otherwise, setting nothing. */
static __always_inline int lt_pick_first(struct lt_loads *l, __u32 a, __u32 b)
{
	for (int i = 0; i < LT_SPANS; i++) {
		__u32 n = lt_len(l->pick[i]);

		if (n == 0)
			continue;
		if (a >= n || b >= n)
			return 0;
		l->at = l->pick[i].lo + a;
		l->at2 = l->pick[i].lo + b;
		return 1;
	}
	return 0;
}

/* lt_span_weight is the weight of a non-empty span, from the prefix sums. */
static __always_inline __u64 lt_span_weight(struct lt_span s)
{
	struct lt_endpoint *first, *last;

	if (s.hi <= s.lo)
		return 0;
	first = lt_ep_at(s.lo);
	last = lt_ep_at(s.hi - 1);
	if (!first || !last)
		return 0;
	return last->cum_weight - first->cum_weight + first->weight;
}

/* lt_weight_cb sums the span weights (l->wfind 0), or finds the span that
 * holds the point l->wx (l->wfind 1). */
static long lt_weight_cb(__u64 i, void *data)
{
	struct lt_loads *l = ((struct lt_walk_ctx *)data)->l;
	__u64 w;

	if (i >= LT_PICK_SPANS)
		return 1;
	lt_bounded(i);
	w = lt_span_weight(l->pick[i]);
	if (!l->wfind) {
		l->wsum += w;
		return 0;
	}
	if (l->wx < w) {
		l->wspan = i;
		return 1;
	}
	l->wx -= w;
	return 0;
}

/* lt_pick_spans_weighted picks by weight over the spans as one list: with
 * rr, the point of round-robin count k on their weight line (lt_rr_point),
 * else a random point; then the span that holds it and the endpoint in it.
 * Weightless spans are picked by rotation or uniformly. */
static __always_inline int lt_pick_spans_weighted(struct lt_loads *l, struct lt_walk_ctx *c, __u32 total, int rr,
						  __u64 k, __u32 *out)
{
	__u32 w;

	l->wsum = 0;
	l->wfind = 0;
	bpf_loop(LT_PICK_SPANS, lt_weight_cb, c, 0);
	if (l->wsum == 0) { /* weightless */
		__u32 j = (rr ? k : bpf_get_prandom_u32()) % total;

		lt_pick_nth(l, c, j, j);
		*out = l->at;
		return LT_OK;
	}
	l->wx = rr ? lt_rr_point(k, l->wsum, total) : lt_rand64() % l->wsum;
	l->wfind = 1;
	l->wspan = LT_PICK_SPANS;
	bpf_loop(LT_PICK_SPANS, lt_weight_cb, c, 0);
	w = l->wspan;
	if (w >= LT_PICK_SPANS)
		return LT_STAT_BAD_INDEX;
	return lt_pick_at(l->pick[w].lo, l->pick[w].hi, l->wx, out);
}

/* lt_pick_spans_two is least_request over the spans (lt_pick_two): two
 * independent draws by weight, the second wins with fewer connections. */
static __always_inline int lt_pick_spans_two(struct lt_loads *l, struct lt_walk_ctx *c, __u32 total, __u32 *out)
{
	__u32 a, b;
	int ret = lt_pick_spans_weighted(l, c, total, 0, 0, &a);

	if (ret != LT_OK)
		return ret;
	ret = lt_pick_spans_weighted(l, c, total, 0, 0, &b);
	if (ret != LT_OK)
		return ret;
	*out = lt_conns_of(b) < lt_conns_of(a) ? b : a;
	return LT_OK;
}

/* lt_in_pick reports whether endpoint idx lies in one of the pick spans. */
static __always_inline int lt_in_pick(const struct lt_loads *l, __u32 idx)
{
	for (int i = 0; i < LT_PICK_SPANS; i++)
		if (idx >= l->pick[i].lo && idx < l->pick[i].hi)
			return 1;
	return 0;
}

/* lt_aff_in reports whether endpoint idx is backend b and in the pick spans. */
static __always_inline int lt_aff_in(const struct lt_loads *l, __u32 idx, const struct lt_addr *b)
{
	struct lt_endpoint *ep;

	if (!lt_in_pick(l, idx))
		return 0;
	ep = lt_ep_at(idx);
	return ep && ep->addr[0] == b->addr[0] && ep->addr[1] == b->addr[1] && ep->addr[2] == b->addr[2] &&
	       ep->addr[3] == b->addr[3] && ep->port == b->port && ep->family == b->family;
}

/*
 * lt_affinity_spans is lt_affinity_pick (affinity.h) over the pick spans
 * as one list: the client's backend while its affinity lasts and it is in
 * them (at its last index, else found by address), else the jump hash of
 * (client, service) over them, which becomes the client's backend.
 */
static __always_inline int lt_affinity_spans(struct lt_loads *l, struct lt_walk_ctx *c, __u32 total, __u32 *out)
{
	__u64 now = bpf_ktime_get_ns();
	struct lt_aff *a = bpf_map_lookup_elem(&lt_affinity, &l->aff);
	struct lt_aff_ep_key k = {};
	__u32 *idx;

	if (lt_aff_live(&l->svc, a, now)) {
		k.fe = l->aff.fe;
		k.backend = a->backend;
		idx = lt_aff_in(l, a->ep, &a->backend) ? &a->ep : bpf_map_lookup_elem(&lt_aff_eps, &k);
		if (idx && lt_aff_in(l, *idx, &a->backend)) {
			*out = *idx;
			a->ep = *out;
			a->last_ns = now;
			return LT_OK;
		}
	}
	lt_pick_nth(l, c, 0, lt_jump(l->aff_hash, total));
	*out = l->at2;
	return lt_aff_start(&l->aff, *out, now);
}

/* lt_pick_spans applies the service's policy to the chosen spans (lt_pick's
 * policies over several spans treated as one list: round_robin and
 * least_request weigh as lt_pick does). A global function, as
 * lt_select: the priority and the distribute path both call it. */
__noinline int lt_pick_spans(struct lt_loads *l, __u32 *out)
{
	struct lt_walk_ctx ctx = {}, *c = &ctx;
	const struct lt_service *svc;
	__u32 total = 0, a, b;

	if (!l || !out)
		return LT_STAT_BAD_INDEX;
	svc = &l->svc;
	ctx.svc = svc;
	ctx.labels = l->labels;
	ctx.l = l;

	for (int i = 0; i < LT_PICK_SPANS; i++)
		total += lt_len(l->pick[i]);
	if (total == 0)
		return LT_STAT_NO_CANDIDATE;
	switch (svc->policy) {
	case LT_POLICY_WEIGHTED:
		return lt_pick_spans_weighted(l, c, total, 0, 0, out);
	case LT_POLICY_ROUND_ROBIN:
		return lt_pick_spans_weighted(l, c, total, 1, lt_rr_next(svc), out);
	case LT_POLICY_CONSISTENT_HASH:
		return lt_affinity_spans(l, c, total, out);
	case LT_POLICY_LEAST_REQUEST:
		return lt_pick_spans_two(l, c, total, out);
	case LT_POLICY_LEAST_CONNECTIONS:
		a = bpf_get_prandom_u32() % total;
		b = total > 1 ? (a + 1 + bpf_get_prandom_u32() % (total - 1)) % total : a;
		break;
	default:
		a = bpf_get_prandom_u32() % total;
		b = a;
	}
	if (!lt_pick_first(l, a, b))
		lt_pick_nth(l, c, a, b);
	*out = l->at2 != l->at && lt_conns_of(l->at2) < lt_conns_of(l->at) ? l->at2 : l->at;
	return LT_OK;
}

#endif /* LOCTREE_LIB_SPANS_H */
