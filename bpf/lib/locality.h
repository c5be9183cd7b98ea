/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The locality-weighted choice inside a priority (docs/FORMAT.md "Priority
 * load" step 6; shared/locality.go): Envoy's chooseHealthyLocality /
 * chooseDegradedLocality (source/common/upstream/locality_wrr.cc,
 * effectiveLocalityWeight) where istiod turns locality weighted LB on
 * (istio/istio loadbalancer.go ApplyToCluster at 86c9f01f). The chosen
 * priority's spans of one set are whole localities; the loader installs
 * each set's localities in endpoint order with the running sum of their
 * effective weights (lt_service.loc). Binary searches find the runs of
 * localities that make up the spans, and one more draw picks a locality by
 * weight: O(log localities), no loop over endpoints.
 */
#ifndef LOCTREE_LIB_LOCALITY_H
#define LOCTREE_LIB_LOCALITY_H

#include "common.h"
#include "maps.h"
#include "pick.h"
#include "affinity.h"
#include "loads.h"

/* Mixed into a consistent_hash client's hash to draw its locality. */
#define LT_AFF_LOC_SALT 0x3c6ef372fe94f82bULL

/*
 * lt_loc_search is the first locality i in [a, b) of the set's records
 * from map index l->loc_base whose endpoints start at or after x (by_cum 0), or
 * whose running weight exceeds x (by_cum 1); b when none does. A global
 * function: the verifier checks its loop once. It returns b + 1 past every
 * valid answer when a record leaves the service's node region.
 */
__noinline __u32 lt_loc_search(struct lt_loads *l, __u32 a, __u32 b, __u64 x, __u32 by_cum)
{
	__u32 end = b, base;

	if (!l)
		return 0;
	base = l->loc_base;
	for (int s = 0; s < LT_MAX_SEARCH && a < b; s++) {
		__u32 mid = a + (b - a) / 2;
		struct lt_node *r = lt_node_of(&l->svc, base + mid);

		if (!r)
			return end + 1;
		if (by_cum ? r->label > x : (__u64)r->lo >= x)
			b = mid;
		else
			a = mid + 1;
	}
	return a;
}

/* lt_loc_cum is the running weight before locality i (0 for the first);
 * *bad is set when a record leaves the service's node region. */
static __always_inline __u64 lt_loc_cum(const struct lt_service *svc, __u32 base, __u32 i, int *bad)
{
	struct lt_node *r;

	if (i == 0)
		return 0;
	r = lt_node_of(svc, base + i - 1);
	if (!r) {
		*bad = 1;
		return 0;
	}
	return r->label;
}

/* lt_loc_memo_holds says whether l->loc was found for the pick spans
 * l->pick[0..2] of the localities at base, n. */
static __always_inline int lt_loc_memo_holds(const struct lt_loads *l, __u32 base, __u32 n)
{
	const struct lt_loc_memo *m = &l->loc;
	__u32 diff = m->base ^ base;

	diff |= m->n ^ n;
	for (int k = 0; k < LT_SPANS; k++)
		diff |= (m->span[k].lo ^ l->pick[k].lo) | (m->span[k].hi ^ l->pick[k].hi);
	return m->valid && diff == 0;
}

/*
 * lt_loc_runs finds, for each of the pick spans l->pick[0..2], the run of
 * the n localities at map index base that makes it up and the run's
 * effective weight, into l->loc (valid when every record lay in the
 * service's node region).
 */
static __always_inline int lt_loc_runs(struct lt_loads *l, __u32 base, __u32 n)
{
	const struct lt_service *svc = &l->svc;
	struct lt_loc_memo *m = &l->loc;
	int bad = 0;

	m->valid = 0;
	for (int k = 0; k < LT_SPANS; k++) {
		struct lt_span sp = l->pick[k];

		m->span[k] = sp;
		m->lo[k] = 0;
		m->hi[k] = 0;
		m->w[k] = 0;
		m->before[k] = 0;
		if (sp.hi <= sp.lo)
			continue;
		m->lo[k] = lt_loc_search(l, 0, n, sp.lo - svc->ep_delta, 0);
		m->hi[k] = lt_loc_search(l, m->lo[k], n, sp.hi - svc->ep_delta, 0);
		if (m->lo[k] > n || m->hi[k] > n)
			return LT_STAT_BAD_INDEX;
		m->before[k] = lt_loc_cum(svc, base, m->lo[k], &bad);
		m->w[k] = lt_loc_cum(svc, base, m->hi[k], &bad) - m->before[k];
	}
	if (bad)
		return LT_STAT_BAD_INDEX;
	m->base = base;
	m->n = n;
	m->valid = 1;
	return LT_OK;
}

/*
 * lt_loc_pick narrows l->pick[0..2], the chosen priority's spans of set (0
 * eligible, 1 degraded), to one locality drawn from draw by effective
 * weight, from the n locality records of the set at map index base (a
 * priority load's, or a distribute rule's: distribute.h). With no
 * effective weight it leaves them (Envoy: no scheduler, the priority's
 * hosts of that availability). The runs of localities that make up the
 * spans are those of the last connect when its spans were the same
 * (lt_loc_memo); only the draw is new.
 */
__noinline int lt_loc_pick(struct lt_loads *l, __u32 set, __u64 draw, __u32 base, __u32 n)
{
	const struct lt_service *svc;
	const struct lt_loc_memo *m;
	__u64 total, x;
	int bad = 0, ret;

	if (!l || set > 1)
		return LT_STAT_BAD_INDEX;
	svc = &l->svc;
	m = &l->loc;
	l->loc_base = base;
	if (!lt_loc_memo_holds(l, base, n)) {
		ret = lt_loc_runs(l, base, n);
		if (ret != LT_OK)
			return ret;
	}
	total = m->w[0] + m->w[1] + m->w[2];
	if (total == 0)
		return LT_OK;
	x = draw % total;
	for (int k = 0; k < LT_SPANS; k++) {
		__u32 i;
		struct lt_node *r;

		if (x >= m->w[k]) {
			x -= m->w[k];
			continue;
		}
		i = lt_loc_search(l, m->lo[k], m->hi[k], m->before[k] + x, 1);
		r = i < m->hi[k] ? lt_node_of(svc, base + i) : NULL;
		if (!r)
			return LT_STAT_BAD_INDEX;
		l->pick[0] = lt_span_of(svc, r, &bad);
		l->pick[1] = (struct lt_span){0, 0};
		l->pick[2] = l->pick[1];
		return bad ? LT_STAT_BAD_INDEX : LT_OK;
	}
	return LT_OK;
}

/* lt_loc_draw is the number that draws a locality: for consistent_hash
 * the client's (as the priority's), else random. */
static __always_inline __u64 lt_loc_draw(const struct lt_loads *l)
{
	if (l->svc.policy == LT_POLICY_CONSISTENT_HASH)
		return lt_mix64(l->aff_hash ^ LT_AFF_LOC_SALT);
	return lt_rand64();
}

#endif /* LOCTREE_LIB_LOCALITY_H */
