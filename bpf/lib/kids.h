/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The child table of a service (struct lt_kid): a (parent, label) -> child
 * hash table the loader writes into the service's node region
 * (loader/kids.go), one probe sequence per tree level.
 */
#ifndef LOCTREE_LIB_KIDS_H
#define LOCTREE_LIB_KIDS_H

#include "common.h"
#include "maps.h"

/*
 * A slot of a service's child table: the loader's kernel layout, not a blob
 * record. The table maps (parent, label) to the child, the parent named by
 * its first child (a parent's children are contiguous, so that index is
 * unique to it); both indices are relative to the service's node_base, so
 * one table serves the service's own tree, its aux trees and its network
 * tree. A slot also holds what the walk needs of the child to go on, so a
 * walk reads one slot per level and the record of the node it ends at only.
 * Slots are node map entries (24 bytes, the size of struct lt_node),
 * written by the loader in the service's node region before the service
 * value is published, and reused only after the grace period, as its node
 * records are (loader/kids.go).
 */
struct lt_kid {
	__u64 label;
	__u32 first;       /* parent's first child, relative to node_base; LT_KID_EMPTY: free slot */
	__u32 child;       /* the child, relative to node_base */
	__u32 child_first; /* the child's first child, relative to node_base: the next level's key */
	__u32 child_count; /* the child's child_count */
};

/* Constants of the child table, shared with loader/kids.go (kidProbes,
 * kidEmpty; TestKidConstantsMatchHeader compares them). */
#define LT_KID_PROBES 16         /* slots a search reads at most: the loader places every key within them */
#define LT_KID_EMPTY 0xffffffffU /* lt_kid.first of a free slot */

/* Multiplier of lt_kid_home (loader/kids.go kidHome computes the same). */
#define LT_KID_MIX 0xff51afd7ed558ccdULL

/* lt_kid_home is the home slot, in [0, slots), of (first, label): the
 * parent xored into the label (an FNV-1a hash, weak in its low bits), one
 * multiply that carries every bit into the high ones, and the high 32 bits
 * scaled to the table (Lemire's multiply-shift range reduction). */
static __always_inline __u32 lt_kid_home(__u32 first, __u64 label, __u32 slots)
{
	__u64 h = (label ^ first) * LT_KID_MIX;

	return (__u32)(((h >> 32) * slots) >> 32);
}

/*
 * lt_kid_in finds the slot of the child labelled want of the parent whose
 * first child is map index first, in svc's child table, or NULL (*bad set
 * when an index left svc's node region): from the key's home slot, up to
 * LT_KID_PROBES consecutive slots (linear probing; the loader places every
 * key within them, after no free slot, and ends the table with a free slot,
 * so a search stops at a free slot or at the key).
 */
static __always_inline struct lt_kid *lt_kid_in(const struct lt_service *svc, __u32 first, __u64 want, int *bad)
{
	__u32 key = first - svc->node_base;
	__u32 i = svc->kids + lt_kid_home(key, want, svc->kid_slots);

	for (int p = 0; p < LT_KID_PROBES; p++, i++) {
		struct lt_kid *k = (struct lt_kid *)lt_node_of(svc, i);

		if (!k) {
			*bad = 1;
			return NULL;
		}
		if (k->first == LT_KID_EMPTY)
			return NULL;
		if (k->label == want && k->first == key)
			return k;
	}
	return NULL;
}

/* lt_kid_child is the node record of a slot's child (*at its map index). */
static __always_inline struct lt_node *lt_kid_child(const struct lt_service *svc, const struct lt_kid *k, __u32 *at,
						     int *bad)
{
	struct lt_node *c;

	if (!k)
		return NULL;
	*at = svc->node_base + k->child;
	c = lt_node_of(svc, *at);
	if (!c)
		*bad = 1;
	return c;
}

/*
 * lt_child_in returns the child of n whose label is want, or NULL (*bad
 * set when an index left svc's node region): one search of the service's
 * child table. delta turns the tree's record indices into map indices
 * (svc->node_delta for the service's own tree and its network tree,
 * aux_delta for the aux trees the priority load walks).
 */
static __always_inline struct lt_node *lt_child_in(const struct lt_service *svc, const struct lt_node *n, __u32 delta,
						    __u64 want, __u32 *at, int *bad)
{
	if (n->child_count == 0) /* its first_child names no parent in the table */
		return NULL;
	return lt_kid_child(svc, lt_kid_in(svc, n->first_child + delta, want, bad), at, bad);
}

#endif /* LOCTREE_LIB_KIDS_H */
