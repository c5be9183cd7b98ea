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
		ret = lt_loads_in(l);
		if (ret == LT_OK)
			ret = lt_pick_in(l, lt_draw(l), out);
	}
	r->lo = l->path[0][m].lo;
	r->hi = l->path[0][m].hi;
	r->node = l->node[0][m];
	r->depth = l->reach[0];
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
