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
 * lt_pick_at is the endpoint of [lo, hi) whose slice of the range's weight
 * holds x (x below the range's weight): a binary search over the prefix
 * sums (cum_weight) for the first endpoint past it. A global function, as
 * lt_select (select.h): the verifier walks the search once, not once per
 * caller.
 */
__noinline int lt_pick_at(__u32 lo, __u32 hi, __u64 x, __u32 *out)
{
	struct lt_endpoint *first = lt_ep_at(lo);
	__u64 target;
	__u32 a = lo, b = hi - 1;

	if (!first || !out || hi <= lo)
		return LT_STAT_BAD_INDEX;
	target = first->cum_weight - first->weight + x;
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

/*
 * lt_rr_point maps round-robin count k to a point of a weight line [0, w)
 * over n endpoints: j = k mod w read row by row in rows of n, taken column
 * by column (a bijection of [0, w), columns of q = w / n points and the
 * first w mod n one longer). Every w counts visit each point once, so each
 * endpoint gets exactly its weight (Envoy's weighted round robin, whose EDF
 * schedule also gives each host its weight in every w picks,
 * RATIONALE.md); with equal weights (w = n·weight) point
 * (k mod n)·weight lies in endpoint k mod n: the plain rotation.
 */
static __always_inline __u64 lt_rr_point(__u64 k, __u64 w, __u32 n)
{
	__u64 j = k % w, q = w / n, rem = w % n, col = j % n;

	return col * q + (col < rem ? col : rem) + j / n;
}

/* lt_rr_next is the service's next round-robin count. */
static __always_inline __u64 lt_rr_next(const struct lt_service *svc)
{
	__u32 slot = svc->slot;
	__u64 *cur = bpf_map_lookup_elem(&lt_rr, &slot);

	return cur ? __sync_fetch_and_add(cur, 1) : bpf_get_prandom_u32();
}

/*
 * lt_pick_weighted picks an index in [lo, hi) by weight: with rr, the
 * point of round-robin count k (lt_rr_point), else a random point, each
 * endpoint with probability proportional to its weight. A weightless range
 * is picked by rotation or uniformly.
 */
static __always_inline int lt_pick_weighted(__u32 lo, __u32 hi, int rr, __u64 k, __u32 *out)
{
	struct lt_endpoint *first = lt_ep_at(lo), *last = lt_ep_at(hi - 1);
	__u64 total;

	if (!first || !last)
		return LT_STAT_BAD_INDEX;
	total = last->cum_weight - first->cum_weight + first->weight;
	if (total == 0) {
		*out = lo + (rr ? k : bpf_get_prandom_u32()) % (hi - lo);
		return LT_OK;
	}
	return lt_pick_at(lo, hi, rr ? lt_rr_point(k, total, hi - lo) : lt_rand64() % total, out);
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

/*
 * lt_pick_two is least_request in one range: two independent draws by
 * weight; the second wins only with fewer open connections.
 */
static __always_inline int lt_pick_two(__u32 lo, __u32 hi, __u32 *out)
{
	__u32 a, b;
	int ret = lt_pick_weighted(lo, hi, 0, 0, &a);

	if (ret != LT_OK)
		return ret;
	ret = lt_pick_weighted(lo, hi, 0, 0, &b);
	if (ret != LT_OK)
		return ret;
	*out = lt_conns_of(b) < lt_conns_of(a) ? b : a;
	return LT_OK;
}

/* lt_counts reports whether a policy counts open connections per backend. */
static __always_inline int lt_counts(__u8 policy)
{
	return policy == LT_POLICY_LEAST_CONNECTIONS || policy == LT_POLICY_LEAST_REQUEST;
}

/*
 * lt_pick chooses one endpoint (map index) in r by svc's policy.
 * round_robin weighs as Envoy's (lt_rr_point). least_request is the power
 * of two choices over the open connection counts (a connection is the
 * request a socket load balancer sees): two independent draws by weight,
 * the second wins with fewer connections; with equal weights that is
 * Envoy's unweightedHostPickNChoices (choice_count 2), with unequal ones
 * the "expand hosts by weight, then P2C" of Envoy's least_request_lb.h
 * (RATIONALE.md). least_connections draws two distinct candidates.
 * consistent_hash needs the client, so a socket program picks it with
 * lt_pick_for (affinity.h); here it is random.
 */
static __always_inline int lt_pick(const struct lt_service *svc, const struct lt_range *r,
				   __u32 *out)
{
	__u32 n = r->hi - r->lo;

	switch (svc->policy) {
	case LT_POLICY_WEIGHTED:
		return lt_pick_weighted(r->lo, r->hi, 0, 0, out);
	case LT_POLICY_ROUND_ROBIN:
		return lt_pick_weighted(r->lo, r->hi, 1, lt_rr_next(svc), out);
	case LT_POLICY_LEAST_REQUEST:
		return lt_pick_two(r->lo, r->hi, out);
	case LT_POLICY_LEAST_CONNECTIONS: {
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
