/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Load-aware widening (docs/TOPOLOGY.md, "Load-aware widening"): a
 * source's candidate node widens to its parent while the connections open
 * to the node's eligible endpoints exceed load_high per endpoint, and
 * narrows back only below load_low per endpoint.
 *
 * A socket outlives the tree it was counted in: an update publishes new
 * regions and reuses the old ones after a grace period. So the counts are
 * not kept by map index but in lt_widen, keyed by a node's stable identity:
 * its service (a hash of the name) and its label path (a hash of the scope
 * keys and values from the root). Every copy of a service's tree names the
 * same entries, so counts carry across updates, and a socket remembers the
 * key of its endpoint's leaf (lt_sock.widen) and walks the parents' keys at
 * close without any region. The loader creates the entries of a tree's
 * paths before it publishes the tree and deletes an entry only once no
 * published or retired tree has its path and its count is 0
 * (loader/kernel/widen.go); and a socket records how many nodes of its
 * path it counted, so its close subtracts exactly what its connect added.
 */
#ifndef LOCTREE_LIB_WIDEN_H
#define LOCTREE_LIB_WIDEN_H

#include "common.h"
#include "maps.h"

/* A node's identity across trees: the key of lt_widen. svc 0: none. */
struct lt_widen_key {
	__u64 svc;  /* hash of the service's name */
	__u64 path; /* hash of the node's scope keys and labels from the root; never 0 */
};

/* Value of lt_widen: one node's open connections and widening state. */
struct lt_widen_val {
	struct lt_widen_key parent; /* the parent's key; path 0 for a child of the root (the root is never counted) */
	__s64 count;                /* connections open to the node's endpoints (counted at connect, given back at close) */
	__u8 wide;                  /* 1: widened, until the count falls below load_low per endpoint */
	__u8 pad[7];
};

/*
 * A node of a load-aware service's tree, in its node region after the
 * child table (lt_service.widen + the node's index from the root): its key
 * (laid out as struct lt_widen_key, so the record is the key of its
 * lookup) and its parent. A node map entry (24 bytes, struct lt_node's
 * size).
 */
struct lt_widen_node {
	__u64 svc;
	__u64 path;
	__u32 parent; /* the parent's index from the root; LT_WIDEN_ROOT for the root */
	__u32 pad;
};

#define LT_WIDEN_ROOT 0xffffffffU
#define LT_WIDEN_LEAVES 6 /* leaf indices per node map entry */

/* The deepest node of each endpoint (its index from the root), by endpoint
 * index in the service's endpoint region: LT_WIDEN_LEAVES per node map
 * entry, from lt_service.widen_leaves. */
struct lt_widen_leaves {
	__u32 leaf[LT_WIDEN_LEAVES];
};

/*
 * Counts of the nodes of load-aware services, for every tree that names
 * them. Only the loader creates and deletes entries; a program that finds
 * no entry counts nothing (the loader's invariant makes that not happen).
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, LT_DEF_NODES);
	__type(key, struct lt_widen_key);
	__type(value, struct lt_widen_val);
} lt_widen SEC(".maps");

/* lt_widen_node_of is the widening record of node idx (a map index in
 * svc's own tree), or NULL when it leaves svc's node region. */
static __always_inline struct lt_widen_node *lt_widen_node_of(const struct lt_service *svc, __u32 idx)
{
	return (struct lt_widen_node *)lt_node_of(svc, svc->widen + (idx - svc->root));
}

/*
 * lt_is_wide updates and returns the state of a node with n eligible
 * endpoints: wide above load_high per endpoint, narrow below load_low, and
 * in between as it was (hysteresis). The flag is written only when it
 * changes: every CPU reads it on every connect.
 */
static __always_inline int lt_is_wide(struct lt_widen_val *v, __u32 n, const struct lt_service *svc)
{
	__s64 c = *(volatile __s64 *)&v->count;
	__u8 wide = v->wide;

	if (c > (__s64)svc->load_high * n)
		wide = 1;
	else if (c < (__s64)svc->load_low * n)
		wide = 0;
	if (wide != v->wide)
		v->wide = wide;
	return wide;
}

/*
 * lt_widen_range widens r, the lookup's candidates, for a load-aware
 * service: from r's node, while the node is wide, its parent's range,
 * never above min_rank (failover_limit). It returns LT_OK, or
 * LT_STAT_BAD_INDEX when an index leaves svc's regions. A global
 * function: the verifier walks it once.
 */
__noinline int lt_widen_range(const struct lt_service *svc, struct lt_range *r)
{
	__u32 n, depth, lo, hi;
	struct lt_node *rec;

	if (!svc || !r)
		return LT_STAT_BAD_INDEX;
	if (svc->load_high == 0)
		return LT_OK;
	n = r->node;
	depth = r->depth;
	if (depth > LT_MAX_LEVELS) /* bounds the walk for the verifier: one level per step */
		return LT_STAT_BAD_INDEX;
	while (depth > svc->min_rank) {
		struct lt_widen_node *w = lt_widen_node_of(svc, n);
		struct lt_widen_val *v;

		rec = lt_node_of(svc, n);
		if (!w || !rec)
			return LT_STAT_BAD_INDEX;
		if (w->parent == LT_WIDEN_ROOT)
			break;
		v = bpf_map_lookup_elem(&lt_widen, w); /* a record starts with its key */
		if (!v || !lt_is_wide(v, rec->hi - rec->lo, svc))
			break;
		n = svc->root + w->parent;
		depth--;
	}
	if (n == r->node)
		return LT_OK;
	rec = lt_node_of(svc, n);
	if (!rec)
		return LT_STAT_BAD_INDEX;
	lo = rec->lo + svc->ep_delta;
	hi = rec->hi + svc->ep_delta;
	if (hi <= lo || lo - svc->ep_base > svc->ep_len || hi - svc->ep_base > svc->ep_len)
		return LT_STAT_BAD_INDEX;
	*r = (struct lt_range){.lo = lo, .hi = hi, .node = n, .depth = depth};
	return LT_OK;
}

/*
 * lt_widen_leaf writes the key of the leaf of endpoint idx (a map index)
 * of svc to k and returns 1 when svc is load-aware; 0 for NULL or any
 * other service, or an index outside its regions (k's svc then 0: not
 * counted).
 */
static __always_inline int lt_widen_leaf(const struct lt_service *svc, __u32 idx, struct lt_widen_key *k)
{
	struct lt_widen_leaves *l;
	struct lt_widen_node *w;
	__u32 e, at, leaf;

	k->svc = 0;
	k->path = 0;
	if (!svc || svc->load_high == 0)
		return 0;
	e = idx - svc->ep_base;
	if (e >= svc->ep_len)
		return 0;
	l = (struct lt_widen_leaves *)lt_node_of(svc, svc->widen_leaves + e / LT_WIDEN_LEAVES);
	at = e % LT_WIDEN_LEAVES;
	lt_bounded(at);
	if (!l || at >= LT_WIDEN_LEAVES)
		return 0;
	leaf = l->leaf[at];
	w = lt_widen_node_of(svc, svc->root + leaf);
	if (!w)
		return 0;
	k->svc = w->svc;
	k->path = w->path;
	return 1;
}

/*
 * lt_widen_add adds d to the count of the first levels nodes on the path
 * of leaf k, up to the root's children: one add per level, found by the
 * parents' keys the entries hold (each lookup keyed by map memory: no
 * stack). Atomic: connects and closes on other CPUs add too. It returns
 * the nodes it added to: a connect records them, and its close takes back
 * from exactly those, whatever entries were created meanwhile (the
 * entries it added to cannot go while they count it).
 */
static __always_inline __u8 lt_widen_add(const struct lt_widen_key *leaf, __s64 d, __u8 levels)
{
	struct lt_widen_val *v = bpf_map_lookup_elem(&lt_widen, leaf);
	__u8 n = 0;

	for (int i = 0; i < LT_MAX_LEVELS && v && n < levels; i++) {
		__sync_fetch_and_add(&v->count, d);
		n++;
		if (v->parent.path == 0)
			break;
		v = bpf_map_lookup_elem(&lt_widen, &v->parent);
	}
	return n;
}

#endif /* LOCTREE_LIB_WIDEN_H */
