/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The pick of a service with a priority load (lt_service.of non-zero):
 * with distribute rules by distribute.h, else by priority.h.
 */
#ifndef LOCTREE_LIB_SELECT_H
#define LOCTREE_LIB_SELECT_H

#include "common.h"
#include "maps.h"
#include "affinity.h"
#include "loads.h"
#include "priority.h"
#include "distribute.h"

/* lt_select_in's answer for a service without a priority load (the value
 * was replaced between the caller's check and its copy). */
#define LT_NO_LOADS (-1)

_Static_assert((LT_LOADS_CACHE & (LT_LOADS_CACHE - 1)) == 0, "lt_loads_open masks the slot");
_Static_assert(sizeof(struct lt_service) % 8 == 0, "lt_loads_bind compares the service in words");

/*
 * lt_loads_open takes the state of a connect to the service value found
 * (loads.h): this CPU's lt_loads_cache entry of its slot, else (taken by
 * the connect this one preempted) a scratch slot; NULL when every one is
 * taken. Either may hold valid loads (lt_loads_bind).
 */
static __always_inline struct lt_loads *lt_loads_open(const struct lt_service *found)
{
	__u32 k = found->slot & (LT_LOADS_CACHE - 1);
	struct lt_loads *l = bpf_map_lookup_elem(&lt_loads_cache, &k);

	if (l && __sync_val_compare_and_swap(&l->busy, 0, 1) == 0)
		return l;
	return lt_loads_take();
}

/*
 * lt_loads_bind readies l, taken, for the service value found: l keeps
 * its loads (and its runs of localities, locality.h) when its copy of the
 * service is found's, every byte; else it copies found in and they are no
 * longer valid (lt_select computes the loads). Callers then take the source labels from l->svc, the one copy.
 */
static __always_inline void lt_loads_bind(struct lt_loads *l, const struct lt_service *found)
{
	const __u64 *a = (const __u64 *)&l->svc, *b = (const __u64 *)found;
	__u64 diff = 0;

	for (int i = 0; i < (int)(sizeof(struct lt_service) / 8); i++)
		diff |= a[i] ^ b[i];
	if (diff == 0)
		return;
	l->valid = 0;
	l->loc.valid = 0;
	__builtin_memcpy(&l->svc, found, sizeof(l->svc));
}

/* lt_loads_label does for the source labels at labels what lt_loads_bind
 * does for the service value. */
static __always_inline void lt_loads_label(struct lt_loads *l, const __u64 *labels)
{
	__u64 diff = 0;

	for (int i = 0; i < LT_MAX_LEVELS; i++)
		diff |= l->labels[i] ^ labels[i];
	if (diff == 0)
		return;
	l->valid = 0;
	__builtin_memcpy(l->labels, labels, sizeof(l->labels));
}

/*
 * lt_select picks by the priority loads of the service copied to l->svc
 * for the source labels in l->labels: those l holds (l->valid: the tree
 * walks skipped, priority.h steps 1-5), else computed and kept there; a
 * computation that fails leaves l invalid. r is the eligible
 * range every candidate lies in (a socket keeps a backend still in it). A
 * service without a priority load is LT_NO_LOADS: the caller takes the
 * plain lookup.
 *
 * A global function (not static): the verifier checks it once per program
 * against its prototype alone, whatever state its caller is in, and the
 * caller goes on after the call with an unknown return value (kernel
 * kernel/bpf/verifier.c, check_func_call: "is global and assumed valid";
 * do_check_subprogs). Its pointers may be NULL as far as the verifier
 * knows, hence the check.
 */
__noinline int lt_select(struct lt_loads *l, struct lt_range *r, __u32 *out)
{
	const struct lt_service *svc;
	__u32 m;
	int ret;

	if (!l || !r || !out)
		return LT_STAT_BAD_INDEX;
	svc = &l->svc;
	if (svc->of == 0)
		return LT_NO_LOADS;
	l->aff_hash = svc->policy == LT_POLICY_CONSISTENT_HASH ? lt_aff_hash(&l->aff) : 0; /* read by consistent_hash alone */
	m = svc->min_rank < LT_DEPTHS ? svc->min_rank : 0;
	if (svc->dist_count) {
		l->valid = 0; /* lt_dist_in writes its own loads */
		ret = lt_dist_in(l, out);
		m = 0;
	} else {
		ret = l->valid ? LT_OK : lt_loads_in(l);
		l->valid = ret == LT_OK;
		if (ret == LT_OK)
			ret = lt_pick_in(l, lt_draw(l), out);
	}
	r->lo = l->st.path[0][m].lo;
	r->hi = l->st.path[0][m].hi;
	r->node = l->st.node[0][m];
	r->depth = l->st.reach[0];
	if (svc->net_rule == 2) { /* candidates in the copies too: the whole region */
		r->lo = svc->ep_base;
		r->hi = svc->ep_base + svc->ep_len;
	}
	return ret;
}

/* lt_select_in is lt_select for the source labels at labels, l bound to
 * a service value (lt_loads_bind). */
static __always_inline int lt_select_in(struct lt_loads *l, const __u64 *labels, struct lt_range *r, __u32 *out)
{
	lt_loads_label(l, labels);
	return lt_select(l, r, out);
}

#endif /* LOCTREE_LIB_SELECT_H */
