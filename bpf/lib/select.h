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

_Static_assert((LT_LOADS_CACHE & (LT_LOADS_CACHE - 1)) == 0, "lt_loads_cached masks the slot");
_Static_assert(sizeof(struct lt_service) % 8 == 0, "lt_same_source compares the service in words");

/* lt_same_source says whether entry c was computed from l's service value
 * and source labels: every byte of both. */
static __always_inline int lt_same_source(const struct lt_loads_cached *c, const struct lt_loads *l)
{
	const __u64 *a = (const __u64 *)&c->svc, *b = (const __u64 *)&l->svc;
	__u64 diff = 0;

	for (int i = 0; i < (int)(sizeof(struct lt_service) / 8); i++)
		diff |= a[i] ^ b[i];
	for (int i = 0; i < LT_MAX_LEVELS; i++)
		diff |= c->labels[i] ^ l->labels[i];
	return diff == 0;
}

#define LT_STATE_WORDS (sizeof(struct lt_prio_state) / 8)
#define LT_STATE_HALF (LT_STATE_WORDS / 2)

/* lt_state_copy copies the loads in two halves: clang inlines a
 * __builtin_memcpy of at most 1 KiB in BPF, and the loads are more. */
static __always_inline void lt_state_copy(struct lt_prio_state *dst, const struct lt_prio_state *src)
{
	__u64 *d = (__u64 *)dst;
	const __u64 *s = (const __u64 *)src;

	__builtin_memcpy(d, s, LT_STATE_HALF * 8);
	__builtin_memcpy(d + LT_STATE_HALF, s + LT_STATE_HALF, (LT_STATE_WORDS - LT_STATE_HALF) * 8);
}

/* lt_loads_keep stores l's loads in entry c, taken. */
static __always_inline void lt_loads_keep(struct lt_loads_cached *c, const struct lt_loads *l)
{
	__builtin_memcpy(&c->svc, &l->svc, sizeof(c->svc));
	__builtin_memcpy(c->labels, l->labels, sizeof(c->labels));
	lt_state_copy(&c->st, &l->st);
	c->valid = 1;
}

/*
 * lt_loads_cached is lt_loads_in, or its result from lt_loads_cache when
 * this CPU computed it last for the same service value and source labels
 * (the tree walks skipped: priority.h steps 1-5). A computation that
 * fails is not kept, and leaves the entry invalid.
 */
static __always_inline int lt_loads_cached(struct lt_loads *l)
{
	__u32 k = l->svc.slot & (LT_LOADS_CACHE - 1);
	struct lt_loads_cached *c = bpf_map_lookup_elem(&lt_loads_cache, &k);
	int ret;

	if (!c || __sync_val_compare_and_swap(&c->busy, 0, 1) != 0)
		return lt_loads_in(l);
	if (c->valid && lt_same_source(c, l)) {
		lt_state_copy(&l->st, &c->st);
		ret = LT_OK;
	} else {
		c->valid = 0;
		ret = lt_loads_in(l);
		if (ret == LT_OK)
			lt_loads_keep(c, l);
	}
	__sync_lock_test_and_set(&c->busy, 0);
	return ret;
}

/*
 * lt_select computes the priority loads of the service copied to l->svc
 * for the source labels in l->labels and picks by them. r is the eligible
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
	l->aff_hash = lt_aff_hash(&l->aff);
	m = svc->min_rank < LT_DEPTHS ? svc->min_rank : 0;
	if (svc->dist_count) {
		ret = lt_dist_in(l, out);
		m = 0;
	} else {
		ret = lt_loads_cached(l);
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

/* lt_select_in is lt_select for the source labels at labels. */
static __always_inline int lt_select_in(struct lt_loads *l, const __u64 *labels, struct lt_range *r, __u32 *out)
{
	if (labels != l->labels)
		__builtin_memcpy(l->labels, labels, sizeof(l->labels));
	return lt_select(l, r, out);
}

#endif /* LOCTREE_LIB_SELECT_H */
