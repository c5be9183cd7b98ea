/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The tree lookup of the socket programs: a walk from a service's root
 * with the source's labels, one child table search per level, to the
 * deepest node matching the source and its endpoint range.
 */
#ifndef LOCTREE_LIB_LOOKUP_H
#define LOCTREE_LIB_LOOKUP_H

#include "common.h"
#include "maps.h"
#include "kids.h"

/* Binary search steps over a node's children: a service has at most 2^24
 * endpoints (shared.MaxEndpoints), so a node at most 2^24 children. */
#define LT_CHILD_SEARCH 25

/* lt_child_search binary-searches the count children from map index base,
 * sorted by label: the kernel's child search before the child table, kept
 * for the benchmark that compares them (lt_lookup_by,
 * bpf/tests/lookuptest.c). */
static __always_inline struct lt_node *lt_child_search(const struct lt_service *svc, __u32 base, __u32 count,
							__u64 want, __u32 *at, int *bad)
{
	__u32 a = 0, b = count;

	for (int s = 0; s < LT_CHILD_SEARCH && a < b; s++) {
		__u32 mid = a + (b - a) / 2;
		struct lt_node *c = lt_node_of(svc, base + mid);

		if (!c) {
			*bad = 1;
			return NULL;
		}
		if (c->label == want) {
			*at = base + mid;
			return c;
		}
		if (c->label < want)
			a = mid + 1;
		else
			b = mid;
	}
	return NULL;
}

/* Where a walk is: a node (map index) and its children (map index of the
 * first, and their number). */
struct lt_place {
	__u32 idx;
	__u32 first;
	__u32 count;
};

/* lt_place_of writes the place of node idx of a tree whose records'
 * indices map at delta; 1 when idx leaves svc's node region. */
static __always_inline int lt_place_of(const struct lt_service *svc, __u32 idx, __u32 delta, struct lt_place *pl)
{
	struct lt_node *n = lt_node_of(svc, idx);

	if (!n)
		return 1;
	*pl = (struct lt_place){.idx = idx, .first = n->first_child + delta, .count = n->child_count};
	return 0;
}

/*
 * lt_step_by moves pl one level down to its child labelled want: 1 when
 * it did, 0 when there is none (*bad set when an index left svc's node
 * region). With the child table the child's place comes from its slot, and
 * its record is not read; with bsearch (a compile-time constant only the
 * benchmark sets) the children's records are binary-searched.
 */
static __always_inline int lt_step_by(const struct lt_service *svc, struct lt_place *pl, __u64 want, int *bad,
				      const int bsearch)
{
	if (bsearch) {
		__u32 idx = 0;
		struct lt_node *c = lt_child_search(svc, pl->first, pl->count, want, &idx, bad);

		if (!c)
			return 0;
		*pl = (struct lt_place){.idx = idx, .first = c->first_child + svc->node_delta, .count = c->child_count};
		return 1;
	}
	if (pl->count == 1) { /* an only child: its record, with no hash to compute */
		struct lt_node *c = lt_node_of(svc, pl->first);

		if (!c) {
			*bad = 1;
			return 0;
		}
		if (c->label != want)
			return 0;
		*pl = (struct lt_place){.idx = pl->first, .first = c->first_child + svc->node_delta, .count = c->child_count};
		return 1;
	}
	struct lt_kid *k = lt_kid_in(svc, pl->first, want, bad);

	if (!k)
		return 0;
	*pl = (struct lt_place){.idx = svc->node_base + k->child, .first = svc->node_base + k->child_first,
				.count = k->child_count};
	return 1;
}

/*
 * lt_lookup_by walks svc's tree with the source labels (one per scope) and
 * stores the deepest node's endpoint range in r. A service with the
 * network rule whose root has no child for the source's network goes on in
 * the network tree with the scopes after network (r->depth counts those).
 * It returns LT_OK when r holds at least one candidate,
 * LT_STAT_NO_CANDIDATE when there is none (an empty service, or a strict
 * service whose walk did not reach full depth) and LT_STAT_BAD_INDEX when
 * an index leaves svc's regions. bsearch (a constant) selects the binary
 * search over sorted children instead of the child table (lt_step_by).
 */
static __always_inline int lt_lookup_by(const struct lt_service *svc, const __u64 *labels,
					struct lt_range *r, const int bsearch)
{
	struct lt_place pl;
	struct lt_node *n;
	int bad = 0;

	if (lt_place_of(svc, svc->root, svc->node_delta, &pl))
		return LT_STAT_BAD_INDEX;
	r->depth = 0;
	for (int d = 0; d < LT_MAX_LEVELS; d++) {
		int found;

		if (d >= svc->levels || pl.count == 0)
			break;
		found = lt_step_by(svc, &pl, labels[d], &bad, bsearch);
		if (bad)
			return LT_STAT_BAD_INDEX;
		if (!found && d == 0 && svc->net_rule) { /* no endpoint on the source's network */
			if (lt_place_of(svc, svc->aux_root[0], svc->node_delta, &pl))
				return LT_STAT_BAD_INDEX;
			continue;
		}
		if (!found)
			break;
		r->depth++;
	}
	n = lt_node_of(svc, pl.idx);
	if (!n)
		return LT_STAT_BAD_INDEX;
	r->node = pl.idx;
	r->lo = n->lo + svc->ep_delta;
	r->hi = n->hi + svc->ep_delta;
	if (r->hi < r->lo || r->lo - svc->ep_base > svc->ep_len || r->hi - svc->ep_base > svc->ep_len)
		return LT_STAT_BAD_INDEX;
	if (svc->mode == LT_MODE_STRICT && r->depth < svc->levels)
		return LT_STAT_NO_CANDIDATE;
	if (r->depth < svc->min_rank) /* bounded failover: none shares enough scopes */
		return LT_STAT_NO_CANDIDATE;
	if (r->lo >= r->hi)
		return LT_STAT_NO_CANDIDATE;
	return LT_OK;
}

/* lt_lookup is the lookup of the socket programs: with the child table. */
static __always_inline int lt_lookup(const struct lt_service *svc, const __u64 *labels, struct lt_range *r)
{
	return lt_lookup_by(svc, labels, r, 0);
}

#endif /* LOCTREE_LIB_LOOKUP_H */
