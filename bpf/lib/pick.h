/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The pick inside a candidate range: one endpoint by the service's policy
 * (random, weighted, round_robin, least_request, least_connections).
 */
#ifndef LOCTREE_LIB_PICK_H
#define LOCTREE_LIB_PICK_H

#include "common.h"
#include "maps.h"

static __always_inline __u64 lt_rand64(void)
{
	return ((__u64)bpf_get_prandom_u32() << 32) | bpf_get_prandom_u32();
}

/*
 * lt_pick_weighted picks an index in [lo, hi) with probability proportional
 * to its weight: a random point in the range's weight, then a binary search
 * over the prefix sums (cum_weight) for the first endpoint past it.
 */
static __always_inline int lt_pick_weighted(__u32 lo, __u32 hi, __u32 *out)
{
	struct lt_endpoint *first = lt_ep_at(lo), *last = lt_ep_at(hi - 1);
	__u64 base, total, target;
	__u32 a = lo, b = hi - 1;

	if (!first || !last)
		return LT_STAT_BAD_INDEX;
	base = first->cum_weight - first->weight;
	total = last->cum_weight - base;
	if (total == 0) {
		*out = lo + bpf_get_prandom_u32() % (hi - lo);
		return LT_OK;
	}
	target = base + lt_rand64() % total;
	/* smallest i in [a, b] with cum_weight[i] > target; b always qualifies */
	for (int s = 0; s < LT_MAX_SEARCH && a < b; s++) {
		__u32 mid = a + (b - a) / 2;
		struct lt_endpoint *e = lt_ep_at(mid);

		if (!e)
			return LT_STAT_BAD_INDEX;
		if (e->cum_weight > target)
			b = mid;
		else
			a = mid + 1;
	}
	*out = a;
	return LT_OK;
}

/* lt_backend_of is an endpoint's address and port, the key of lt_conns. */
static __always_inline void lt_backend_of(const struct lt_endpoint *ep, struct lt_addr *b)
{
	__builtin_memcpy(b->addr, ep->addr, sizeof(b->addr));
	b->port = ep->port;
	b->family = ep->family;
	b->pad = 0;
}

/* lt_conns_of is the number of open connections to endpoint idx. */
static __always_inline __u64 lt_conns_of(__u32 idx)
{
	struct lt_endpoint *ep = lt_ep_at(idx);
	struct lt_addr b;
	__u64 *v;

	if (!ep)
		return 0;
	lt_backend_of(ep, &b);
	v = bpf_map_lookup_elem(&lt_conns, &b);
	return v ? *v : 0;
}

/* lt_counts reports whether a policy counts open connections per backend. */
static __always_inline int lt_counts(__u8 policy)
{
	return policy == LT_POLICY_LEAST_CONNECTIONS || policy == LT_POLICY_LEAST_REQUEST;
}

/*
 * lt_pick chooses one endpoint (map index) in r by svc's policy.
 * least_connections and least_request are the power of two random choices
 * over the open connection counts (a connection is the request a socket
 * load balancer sees), two distinct candidates as shared's picker draws
 * them. consistent_hash needs the client, so a socket program picks it with
 * lt_pick_for (affinity.h); here it is random.
 */
static __always_inline int lt_pick(const struct lt_service *svc, const struct lt_range *r,
				   __u32 *out)
{
	__u32 n = r->hi - r->lo;

	switch (svc->policy) {
	case LT_POLICY_WEIGHTED:
		return lt_pick_weighted(r->lo, r->hi, out);
	case LT_POLICY_ROUND_ROBIN: {
		__u32 slot = svc->slot;
		__u64 *cur = bpf_map_lookup_elem(&lt_rr, &slot);
		__u64 k = cur ? __sync_fetch_and_add(cur, 1) : bpf_get_prandom_u32();

		*out = r->lo + (__u32)(k % n);
		return LT_OK;
	}
	case LT_POLICY_LEAST_CONNECTIONS:
	case LT_POLICY_LEAST_REQUEST: {
		__u32 a = bpf_get_prandom_u32() % n, b = a;

		if (n > 1)
			b = (a + 1 + bpf_get_prandom_u32() % (n - 1)) % n;
		*out = lt_conns_of(r->lo + b) < lt_conns_of(r->lo + a) ? r->lo + b : r->lo + a;
		return LT_OK;
	}
	default:
		*out = r->lo + bpf_get_prandom_u32() % n;
		return LT_OK;
	}
}

#endif /* LOCTREE_LIB_PICK_H */
