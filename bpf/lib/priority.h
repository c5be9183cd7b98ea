/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Envoy's priority load in the kernel (docs/FORMAT.md, "Priority load",
 * steps 1-6), for services whose lt_service.of is non-zero: three tree
 * walks (eligible, degraded, unhealthy; three more per group of copies
 * with the network rule, whose other-network trees rank the other
 * networks' endpoints: "Network rule with a priority load", or the other
 * values of another first scope to other_depth: "Copies by the first
 * scope", or a class before the locality: "Classes before the locality")
 * record the
 * source's range at every depth; the priorities are the ranks, deepest first, each at most two
 * spans per set (three where a failover rule splits the region's rank);
 * their loads follow Envoy's recalculatePerPriorityState and panic rules in
 * integers; choosePriority draws one and the service's policy picks inside
 * its spans. O(levels x log branching), no loop over endpoints.
 */
#ifndef LOCTREE_LIB_PRIORITY_H
#define LOCTREE_LIB_PRIORITY_H

#include "common.h"
#include "maps.h"
#include "kids.h"
#include "loads.h"
#include "spans.h"
#include "locality.h"

/* lt_tree_root is the map index of set's root, and the delta of its
 * records (an other-network tree's root is found by lt_walk_other). */
static __always_inline __u32 lt_tree_root(const struct lt_service *svc, __u32 set, __u32 *delta)
{
	*delta = set == 0 ? svc->node_delta : svc->aux_delta;
	return set == 0 ? svc->root : svc->aux_root[(set - 1) & 1];
}

/* lt_groups is the number of groups of copies in the other-value tree
 * (net_rule 2), 0 without one. */
static __always_inline __u32 lt_groups(const struct lt_service *svc)
{
	__u32 g = svc->first;

	if (svc->net_rule != 2)
		return 0;
	if (svc->other_depth > LT_MAX_LEVELS) /* the network rule: its classes twice, and the ranked copies */
		g = 2 * g - 1;
	if (g < 1)
		g = 1;
	return g > LT_MAX_GROUPS ? LT_MAX_GROUPS : g;
}

/* lt_trees is the number of trees the walk goes down: the three sets', and
 * with the network rule of a spillover service (or copies by its first
 * scope) three per group of copies. */
static __always_inline __u32 lt_trees(const struct lt_service *svc)
{
	return LT_SETS * (1 + lt_groups(svc));
}

/* Seed of a class's key (shared/groups.go classKeySeed). */
#define LT_CLASS_SEED 0x243f6a8885a308d3ULL

/* One group of copies (shared/groups.go otherGroup): the scope d its class
 * first differs from the source at, whether it is on the other networks
 * (net) or the network rule's ranked copies, how many levels its key
 * takes (chain) and where its walk stops. */
struct lt_group {
	__u32 d;
	__u32 chain;
	__u32 stop;
	__u32 net;
	__u32 ranked;
};

/* lt_group is group g of svc, in the order of shared/groups.go
 * otherGroups: copies by a first scope (other_depth at most the levels):
 * the classes d = first-1 .. 0; under the network rule (other_depth past
 * them): d = first-1 .. 1, the ranked copies, then d = first-1 .. 1 on
 * the other networks. */
static __always_inline struct lt_group lt_group(const struct lt_service *svc, __u32 g)
{
	__u32 first = svc->first, k = first - 1;
	struct lt_group x = {.chain = first, .stop = svc->class_depth};

	if (svc->other_depth <= LT_MAX_LEVELS) {
		x.d = first - 1 - g;
		x.stop = svc->other_depth;
		return x;
	}
	if (g < k) {
		x.d = first - 1 - g;
		return x;
	}
	if (g == k) {
		x.ranked = 1;
		x.chain = 1;
		x.stop = LT_MAX_LEVELS + 1;
		return x;
	}
	x.d = first - 1 - (g - k - 1);
	x.net = 1;
	return x;
}

/* lt_reached says whether one of the three trees from base reached depth. */
static __always_inline int lt_reached(const struct lt_loads *l, __u32 base, __u32 depth)
{
	if (base > LT_TREES - LT_SETS)
		return 0;
	lt_bounded(base);
	return l->st.reach[base] >= depth || l->st.reach[base + 1] >= depth || l->st.reach[base + 2] >= depth;
}

/* lt_group_key is the key of the source's copies in group x
 * (shared/network.go groupKey): the first scope's value, or otherNetwork
 * when no endpoint has it; for a class d >= 1 the hash of the source's
 * values before d and at d (otherNetwork when no endpoint of the prefix
 * has it: the own trees, or for a class on the other networks the ranked
 * copies' trees from ranked, reached no deeper). */
static __always_inline __u64 lt_group_key(const struct lt_loads *l, const __u64 *labels, struct lt_group x, __u32 ranked)
{
	__u64 m = lt_reached(l, 0, 1) ? labels[0] : LT_OTHER_NETWORK, h, v;
	__u32 d = x.d;


	if (d == 0)
		return m;
	if (d >= LT_MAX_LEVELS)
		return 0;
	h = lt_mix64(((__u64)d | 1ULL << 8 | (x.net ? 1ULL << 9 : 0)) ^ LT_CLASS_SEED);
	for (__u32 j = 0; j < LT_MAX_LEVELS; j++) {
		if (j > d)
			break;
		v = labels[j & (LT_MAX_LEVELS - 1)];
		if (j == d && !lt_reached(l, x.net ? ranked : 0, d + 1))
			v = LT_OTHER_NETWORK;
		if (j == 0 && x.net)
			v = m;
		h = lt_mix64(h ^ v);
	}
	return h;
}

/* lt_key_in is lt_group_key of group g for the service and labels in l: a
 * global function, checked once on its own, not in every state of the
 * walk's callback. */
__noinline __u64 lt_key_in(struct lt_loads *l, __u32 g)
{
	if (!l || g >= LT_MAX_GROUPS)
		return 0;
	return lt_group_key(l, l->labels, lt_group(&l->svc, g), LT_SETS * l->svc.first);
}

/* lt_step walks tree set one level down from depth d: one child search.
 * It returns 1 when an index leaves the service's regions. */
static __always_inline int lt_step(struct lt_walk_ctx *c, __u32 set, __u32 d)
{
	const struct lt_service *svc = c->svc;
	struct lt_loads *l = c->l;
	__u32 delta, at = 0;
	struct lt_node *n, *ch;
	int bad = 0;

	__u64 want;

	if (set >= LT_TREES || d >= LT_MAX_LEVELS)
		return 0;
	lt_bounded(set);
	want = c->labels[d];
	if (set >= LT_SETS) { /* a group's tree: its key down its chain, then the labels */
		__u32 g = set / LT_SETS - 1;

		lt_bounded(g);
		if (g >= LT_MAX_GROUPS)
			return 1;
		if (set % LT_SETS == 0 && d == 0) /* the trees it depends on were walked before */
			l->key[g] = lt_key_in(l, g);
		if (d < l->gchain[g])
			want = l->key[g];
	}
	if (l->stop[set])
		return 0;
	lt_tree_root(svc, set, &delta);
	n = lt_node_of(svc, l->st.node[set][d]);
	if (!n)
		return 1;
	ch = n->child_count ? lt_child_in(svc, n, delta, want, &at, &bad) : NULL;
	if (bad)
		return 1;
	if (!ch) {
		l->stop[set] = 1;
		return 0;
	}
	l->st.path[set][d + 1] = lt_span_of(svc, ch, &bad);
	l->st.node[set][d + 1] = at;
	l->st.reach[set] = d + 1;
	return bad;
}

/* lt_level_cb walks tree i/levels from depth i%levels one level down
 * (FORMAT.md "Priority load" step 1). One tree per call: the verifier
 * checks one child search, not three (program load time). */
static long lt_level_cb(__u64 i, void *data)
{
	struct lt_walk_ctx *c = data;
	__u32 d = i, levels = c->svc->levels, set;

	if (levels == 0 || levels > LT_MAX_LEVELS)
		return 1;
	set = d / levels;
	d = d % levels;
	lt_bounded(set); /* opaque: the checks below stay on these registers */
	lt_bounded(d);
	if (d >= LT_MAX_LEVELS || set >= LT_TREES)
		return 1;
	if (lt_step(c, set, d)) {
		c->bad = 1;
		return 1;
	}
	return 0;
}

/* lt_walk_other starts the walk of each set's other-network tree at the
 * set's child of its root (labelled set + 1); a set without copies has an
 * empty one (shared/network.go walkOther). */
static __always_inline int lt_walk_other(const struct lt_service *svc, struct lt_loads *l)
{
	struct lt_node *x = lt_node_of(svc, svc->other_root);
	int bad = 0;

	if (!x)
		return LT_STAT_BAD_INDEX;
	for (__u32 set = 0; set < LT_SETS; set++) {
		__u32 at = 0;
		struct lt_node *d = x->child_count ? lt_child_in(svc, x, svc->aux_delta, set + 1, &at, &bad) : NULL;
		struct lt_span sp = lt_span_of(svc, d ? d : x, &bad);

		if (!d)
			sp.hi = sp.lo;
		/* every group's tree of the set starts at the set's node (those
		 * of groups the service has not are never read: no branch) */
		for (__u32 t = LT_SETS + set; t < LT_TREES; t += LT_SETS) {
			l->st.reach[t] = 0;
			l->stop[t] = d ? 0 : 1;
			l->st.node[t][0] = d ? at : svc->other_root;
			l->st.path[t][0] = sp;
		}
	}
	return bad ? LT_STAT_BAD_INDEX : LT_OK;
}

/* lt_other_in readies the walks of the groups' trees of the service in l
 * (lt_walk_other) and their chains, stops and kinds: a global function,
 * checked once on its own, so that its branches do not fork the state the
 * rest of the computation is checked in. */
__noinline int lt_other_in(struct lt_loads *l)
{
	if (!l)
		return LT_STAT_BAD_INDEX;
	for (__u32 g = 0; g < LT_MAX_GROUPS; g++) {
		struct lt_group x = lt_group(&l->svc, g);

		l->gchain[g] = x.chain;
		l->gstop[g] = x.stop;
		l->granked[g] = x.ranked;
	}
	return lt_walk_other(&l->svc, l);
}

/* lt_tail_cb ends the walk of tree i: below the deepest match, the empty
 * range at its lo. A group's walk stops at its depth (the copies by a first
 * scope other than network at other_depth, a class at class_depth): the
 * ranks below are one, as if the walk stopped there (shared/network.go
 * walkOther). One tree per call, as lt_level_cb. */
static long lt_tail_cb(__u64 i, void *data)
{
	struct lt_walk_ctx *c = data;
	struct lt_loads *l = c->l;
	__u32 set = i, r, g;

	lt_bounded(set);
	if (set >= LT_TREES)
		return 1;
	r = l->st.reach[set];
	if (set >= LT_SETS) {
		g = set / LT_SETS - 1;
		lt_bounded(g);
		if (g >= LT_MAX_GROUPS)
			return 1;
		if (r > l->gstop[g])
			l->st.reach[set] = r = l->gstop[g];
	}
	lt_bounded(r);
	if (r >= LT_DEPTHS) {
		c->bad = 1;
		return 1;
	}
	for (__u32 j = 1; j < LT_DEPTHS; j++) {
		if (j <= r)
			continue;
		l->st.path[set][j].lo = l->st.path[set][r].lo;
		l->st.path[set][j].hi = l->st.path[set][r].lo;
		l->st.node[set][j] = l->st.node[set][r];
	}
	return 0;
}

/* lt_walk walks the three trees (and their other-network trees) with the
 * source's labels. */
static __always_inline int lt_walk(const struct lt_service *svc, struct lt_loads *l, struct lt_walk_ctx *c)
{
	__u32 trees = lt_trees(svc);
	int bad = 0;

	for (__u32 set = 0; set < LT_SETS; set++) {
		__u32 delta, idx = lt_tree_root(svc, set, &delta);
		struct lt_node *n = lt_node_of(svc, idx);

		if (!n)
			return LT_STAT_BAD_INDEX;
		l->st.path[set][0] = lt_span_of(svc, n, &bad);
		l->st.node[set][0] = idx;
		l->st.reach[set] = 0;
		l->stop[set] = 0;
	}
	if (bad)
		return LT_STAT_BAD_INDEX;
	if (trees > LT_SETS && lt_other_in(l) != LT_OK)
		return LT_STAT_BAD_INDEX;
	bpf_loop(trees * svc->levels, lt_level_cb, c, 0);
	if (c->bad)
		return LT_STAT_BAD_INDEX;
	bpf_loop(trees, lt_tail_cb, c, 0);
	return c->bad ? LT_STAT_BAD_INDEX : LT_OK;
}

/* lt_rule_to finds the failover rule whose from-region is want (rules are
 * node records sorted by label, the to-region's label in lo and hi). */
static __always_inline int lt_rule_to(const struct lt_service *svc, __u64 want, __u64 *to)
{
	__u32 a = 0, b = svc->rule_count;

	for (int s = 0; s < 8 && a < b; s++) {
		__u32 mid = a + (b - a) / 2;
		struct lt_node *r = lt_node_of(svc, svc->rules + mid);

		if (!r)
			return 0;
		if (r->label == want) {
			*to = (__u64)r->hi << 32 | r->lo;
			return 1;
		}
		if (r->label < want)
			a = mid + 1;
		else
			b = mid;
	}
	return 0;
}

/* lt_to_cb finds the failover rule's to-region (l->to_label) in tree i:
 * one child of the source's node at the region's depth. */
static long lt_to_cb(__u64 i, void *data)
{
	struct lt_walk_ctx *c = data;
	const struct lt_service *svc = c->svc;
	struct lt_loads *l = c->l;
	__u32 set = i, g = svc->region_at, delta, at = 0;
	struct lt_node *n, *ch;
	int bad = 0;

	if (set >= LT_TREES || g >= LT_MAX_LEVELS)
		return 1;
	lt_bounded(set);
	lt_bounded(g);
	l->st.to[set].lo = l->st.path[set][g].lo;
	l->st.to[set].hi = l->st.to[set].lo;
	if (l->st.reach[set] < g)
		return 0;
	lt_tree_root(svc, set, &delta);
	n = lt_node_of(svc, l->st.node[set][g]);
	if (!n)
		goto bad;
	ch = lt_child_in(svc, n, delta, l->to_label, &at, &bad);
	if (bad)
		goto bad;
	if (ch)
		l->st.to[set] = lt_span_of(svc, ch, &bad);
	if (bad)
		goto bad;
	return 0;
bad:
	c->bad = 1;
	return 1;
}

/*
 * lt_failover applies the first failover rule whose from is the source's
 * region (Istio's applyLocalityFailover). It sets l->split to the region's
 * depth, or -1 when no rule applies.
 */
static __always_inline int lt_failover(const struct lt_service *svc, const __u64 *labels, struct lt_loads *l,
				       struct lt_walk_ctx *c)
{
	__u32 g = svc->region_at;

	l->split = -1;
	if (svc->rule_count == 0 || g >= LT_MAX_LEVELS || g >= svc->levels)
		return LT_OK;
	lt_bounded(g);
	if (!lt_rule_to(svc, labels[g], &l->to_label))
		return LT_OK;
	bpf_loop(lt_trees(svc), lt_to_cb, c, 0);
	if (c->bad)
		return LT_STAT_BAD_INDEX;
	l->split = g;
	return LT_OK;
}

/* lt_count_rank is the number of endpoints of a set whose rank is exactly
 * r: range(r) minus the nested range(r+1) (step 2). */
static __always_inline __u32 lt_count_rank(const struct lt_loads *l, __u32 set, __u32 r)
{
	const struct lt_span *a;

	if (set >= LT_TREES || r >= LT_DEPTHS - 1)
		return 0;
	lt_bounded(set);
	lt_bounded(r);
	a = &l->st.path[set][r];
	return lt_len(a[0]) - lt_len(a[1]);
}

/* lt_to_len is the size of the failover rule's to-region in tree t. */
static __always_inline __u32 lt_to_len(const struct lt_loads *l, __u32 t)
{
	if (t >= LT_TREES)
		return 0;
	lt_bounded(t);
	return lt_len(l->st.to[t]);
}

/* lt_avail is Envoy's per-priority health (or degraded) value,
 * min(100, overprov*hosts/total), overprov the service's overprovisioning
 * factor (lt_service.of). */
static __always_inline __u32 lt_avail(__u32 overprov, __u32 hosts, __u32 total)
{
	__u64 v;

	if (total == 0)
		return 0;
	v = (__u64)overprov * hosts / total;
	return v > 100 ? 100 : (__u32)v;
}

/* The endpoints of a priority by health, as Envoy's host set counts them. */
struct lt_hosts {
	__u32 healthy;
	__u32 degraded;
	__u32 unhealthy;
};

/* lt_hosts_minus is a's endpoints without b's (b is a part of a). */
static __always_inline struct lt_hosts lt_hosts_minus(struct lt_hosts a, struct lt_hosts b)
{
	return (struct lt_hosts){a.healthy - b.healthy, a.degraded - b.degraded, a.unhealthy - b.unhealthy};
}

/* lt_add_priority appends the priority of rank (split by a failover rule as
 * kind says) unless it has no endpoint (step 3). While the healthy
 * availabilities so far sum to less than 100 it adds this one's: where
 * they reach 100, every load is known without the rest of step 4
 * (lt_priority_loads's common case). */
static __always_inline void lt_add_priority(struct lt_loads *l, __u32 overprov, __u32 rank, __u8 kind, __u8 other,
					    struct lt_hosts n)
{
	__u32 p = l->st.n, total = n.healthy + n.degraded + n.unhealthy, a;

	if (total == 0 || p >= LT_MAX_PRIO)
		return;
	lt_bounded(p);
	l->st.rank[p] = rank;
	l->st.kind[p] = kind;
	l->st.other[p] = other;
	l->st.healthy[p] = n.healthy;
	l->st.degraded[p] = n.degraded;
	l->st.total[p] = total;
	l->st.n = p + 1;
	if (l->hfirst >= 0)
		return;
	a = lt_avail(overprov, n.healthy, total);
	l->avail_h[p] = a;
	if (l->hsum + a >= 100)
		l->hfirst = p;
	else
		l->hsum += a;
}

/*
 * The loops over priorities and spans below are bpf_loop callbacks that
 * keep their running values in the scratch slot: the verifier checks each
 * body once, instead of every combination of branches over ten priorities.
 */

/* lt_rank_cb adds the priorities of rank levels-i%(LT_MAX_LEVELS+1) of
 * the sets' trees (i below LT_MAX_LEVELS+1) or of group i/(LT_MAX_LEVELS+1)
 * - 1's trees, the failover rule's rank split in two; ranks below min_rank
 * are none; with the network rule (or copies by the first scope) rank 0
 * of the sets' trees is the groups' priorities, and with classes before
 * the locality every rank below first (steps 2-3). */
static long lt_rank_cb(__u64 i, void *data)
{
	struct lt_walk_ctx *c = data;
	const struct lt_service *svc = c->svc;
	struct lt_loads *l = c->l;
	__u32 other = i / (LT_MAX_LEVELS + 1), b = LT_SETS * other;
	int r = (int)svc->levels - (int)(i % (LT_MAX_LEVELS + 1));
	int classes = lt_groups(svc) > 1, lowest = svc->net_rule == 2 ? 1 : (int)svc->min_rank;
	struct lt_hosts n;

	lt_bounded(other);
	if (other > LT_MAX_GROUPS)
		return 1;
	if (classes && other == 0)
		lowest = svc->first;
	if (classes && other >= 1 && l->granked[other - 1])
		lowest = svc->first;
	if (r < 0 || r < lowest)
		return 0;
	n.healthy = lt_count_rank(l, b, r);
	n.degraded = lt_count_rank(l, b + 1, r);
	n.unhealthy = lt_count_rank(l, b + 2, r);
	if (r == l->split) {
		struct lt_hosts to = {lt_to_len(l, b), lt_to_len(l, b + 1), lt_to_len(l, b + 2)};

		lt_add_priority(l, c->svc->of, r, LT_FO_TO, other, to);
		lt_add_priority(l, c->svc->of, r, LT_FO_REST, other, lt_hosts_minus(n, to));
		return 0;
	}
	lt_add_priority(l, c->svc->of, r, LT_FO_NONE, other, n);
	return 0;
}

/* lt_avail_cb computes priority i's availabilities and their sum (step 4). */
static long lt_avail_cb(__u64 i, void *data)
{
	struct lt_walk_ctx *c = data;
	struct lt_loads *l = c->l;
	__u32 p = i;

	if (p >= LT_MAX_PRIO || p >= l->st.n)
		return 1;
	lt_bounded(p);
	l->avail_h[p] = lt_avail(c->svc->of, l->st.healthy[p], l->st.total[p]);
	l->avail_d[p] = lt_avail(c->svc->of, l->st.degraded[p], l->st.total[p]);
	l->sum += l->avail_h[p] + l->avail_d[p];
	return 0;
}

/* lt_spread_cb is Envoy's distributeLoad, healthy loads first (i < n),
 * then degraded: as much of the rest as each priority's
 * availability allows, in priority order. */
static long lt_spread_cb(__u64 i, void *data)
{
	struct lt_loads *l = ((struct lt_walk_ctx *)data)->l;
	int deg = i >= l->st.n;
	__u32 p = deg ? i - l->st.n : i, a, x;

	if (p >= LT_MAX_PRIO || p >= l->st.n || l->nta == 0)
		return 0;
	lt_bounded(p);
	a = deg ? l->avail_d[p] : l->avail_h[p];
	x = a * 100 / l->nta;
	x = x < l->rem ? x : l->rem;
	if (deg) {
		if (l->first_d < 0 && a > 0)
			l->first_d = p;
		l->st.ld[p] = x;
	} else {
		if (l->first_h < 0 && a > 0)
			l->first_h = p;
		l->st.lh[p] = x;
	}
	l->rem -= x;
	return 0;
}

/* lt_panic_cb marks priority i in panic when 100*(healthy+degraded) <
 * threshold*total (step 5, Envoy's isHostSetInPanic) and counts hosts. */
static long lt_panic_cb(__u64 i, void *data)
{
	struct lt_walk_ctx *c = data;
	struct lt_loads *l = c->l;
	__u32 p = i;

	if (p >= LT_MAX_PRIO || p >= l->st.n)
		return 1;
	lt_bounded(p);
	if (100 * ((__u64)l->st.healthy[p] + l->st.degraded[p]) < (__u64)c->svc->panic * l->st.total[p])
		l->st.panic |= 1U << p;
	l->hosts += l->st.total[p];
	return 0;
}

/* lt_share_cb gives priority i its share of all hosts (total panic, Envoy's
 * recalculateLoadInTotalPanic). */
static long lt_share_cb(__u64 i, void *data)
{
	struct lt_loads *l = ((struct lt_walk_ctx *)data)->l;
	__u32 p = i, x;

	if (p >= LT_MAX_PRIO || p >= l->st.n || l->hosts == 0)
		return 1;
	lt_bounded(p);
	x = 100 * (__u64)l->st.total[p] / l->hosts;
	l->st.lh[p] = x;
	l->st.ld[p] = 0;
	l->rem -= x;
	return 0;
}

/* lt_priority_loads computes the loads from the counts (steps 4-5, Envoy's
 * recalculatePerPriorityState and recalculatePerPriorityPanic; not Istio's
 * distribute, which is distribute.h). */
static __always_inline void lt_priority_loads(const struct lt_service *svc, struct lt_loads *l, struct lt_walk_ctx *c)
{
	__s32 fh, fd;

	for (int p = 0; p < LT_MAX_PRIO; p++) {
		l->st.lh[p] = 0;
		l->st.ld[p] = 0;
	}
	fh = l->hfirst;
	if (fh >= 0 && fh < LT_MAX_PRIO) {
		/* The healthy availabilities of P0..fh reach 100: the normalized
		 * total is 100, each takes its availability, fh the rest, the
		 * others and every degraded load 0, no panic (Envoy's
		 * computation, exactly, as shared's healthyFirst). */
		for (int p = 0; p < LT_MAX_PRIO; p++)
			if (p < fh)
				l->st.lh[p] = l->avail_h[p];
		l->st.lh[fh] = 100 - l->hsum;
		return;
	}
	l->sum = 0;
	bpf_loop(l->st.n, lt_avail_cb, c, 0);
	l->nta = l->sum > 100 ? 100 : l->sum;
	l->rem = 100;
	l->first_h = -1;
	l->first_d = -1;
	bpf_loop(2 * l->st.n, lt_spread_cb, c, 0);
	fh = l->first_h;
	fd = l->first_d;
	if (l->nta > 0 && l->rem > 0 && fh >= 0 && fh < LT_MAX_PRIO)
		l->st.lh[fh] += l->rem;
	else if (l->nta > 0 && l->rem > 0 && fd >= 0 && fd < LT_MAX_PRIO)
		l->st.ld[fd] += l->rem;
	if (svc->panic == 0 && l->nta == 0) {
		l->st.lh[0] = 100;
		return;
	}
	if (l->nta == 100)
		return;
	l->hosts = 0;
	bpf_loop(l->st.n, lt_panic_cb, c, 0);
	if (l->st.n > LT_MAX_PRIO || l->st.panic != (1U << l->st.n) - 1 || l->hosts == 0)
		return;
	l->rem = 100;
	bpf_loop(l->st.n, lt_share_cb, c, 0);
	l->st.lh[0] += l->rem;
}

/*
 * lt_loads_compute fills l with the priority loads of the source labels
 * (steps 1-5). It returns LT_OK when there is a priority,
 * LT_STAT_NO_CANDIDATE when there is none (bounded failover, or no
 * endpoint), LT_STAT_BAD_INDEX when an index leaves the service's regions.
 */
static __always_inline int lt_loads_compute(const struct lt_service *svc, const __u64 *labels, struct lt_loads *l)
{
	struct lt_walk_ctx c = {.svc = svc, .labels = labels, .l = l};
	int ret;

	l->st.n = 0;
	l->st.panic = 0;
	l->hsum = 0;
	l->hfirst = -1;
	ret = lt_walk(svc, l, &c);
	if (ret == LT_OK)
		ret = lt_failover(svc, labels, l, &c);
	if (ret != LT_OK)
		return ret;
	bpf_loop((LT_MAX_LEVELS + 1) * (lt_trees(svc) / LT_SETS), lt_rank_cb, &c, 0);
	if (l->st.n == 0)
		return LT_STAT_NO_CANDIDATE;
	lt_priority_loads(svc, l, &c);
	return LT_OK;
}

/* lt_choose_cb is one step of Envoy's choosePriority: l->draw (h%100+1)
 * against the cumulative healthy loads, then the degraded ones. */
static long lt_choose_cb(__u64 i, void *data)
{
	struct lt_loads *l = ((struct lt_walk_ctx *)data)->l;
	int deg = i >= l->st.n;
	__u32 p = deg ? i - l->st.n : i;

	if (p >= LT_MAX_PRIO || p >= l->st.n)
		return 0;
	lt_bounded(p);
	l->agg += deg ? l->st.ld[p] : l->st.lh[p];
	if (l->draw > l->agg)
		return 0;
	l->chosen = p;
	l->chosen_deg = deg;
	return 1;
}

/* lt_spans_of writes the endpoints of a set in priority p: range(rank)
 * minus range(rank+1); the failover rule's to-region; or the rest of the
 * split rank (three spans). */
static __always_inline void lt_spans_of(const struct lt_loads *l, __u32 set, __u32 p, struct lt_span *out)
{
	struct lt_span a, b, to, x, y;
	__u32 r;

	if (set >= LT_SETS || p >= LT_MAX_PRIO)
		return;
	lt_bounded(p);
	set += LT_SETS * l->st.other[p];
	lt_bounded(set);
	if (set >= LT_TREES)
		return;
	r = l->st.rank[p];
	if (r >= LT_DEPTHS - 1)
		return;
	lt_bounded(r);
	a = l->st.path[set][r];
	b = l->st.path[set][r + 1];
	to = l->st.to[set];
	if (l->st.kind[p] == LT_FO_TO) {
		out[0] = to;
		out[1] = (struct lt_span){to.hi, to.hi};
		out[2] = out[1];
		return;
	}
	if (l->st.kind[p] == LT_FO_REST && to.hi > to.lo) {
		x = b;
		y = to;
		if (to.lo < b.lo || (to.lo == b.lo && to.hi < b.hi)) {
			x = to;
			y = b;
		}
		out[0] = (struct lt_span){a.lo, x.lo};
		out[1] = (struct lt_span){x.hi, y.lo};
		out[2] = (struct lt_span){y.hi, a.hi};
		return;
	}
	out[0] = (struct lt_span){a.lo, b.lo};
	out[1] = (struct lt_span){b.hi, a.hi};
	out[2] = (struct lt_span){a.hi, a.hi};
}

/* lt_pick_loads draws a priority (step 6: choosePriority; no load anywhere:
 * P0 healthy) and picks in its healthy spans, its degraded spans, or in
 * panic all of them (Envoy's hostSourceToUse); a service with locality
 * weighting draws a locality of those spans first (locality.h). */
static __always_inline int lt_pick_loads(const struct lt_service *svc, const __u64 *labels, struct lt_loads *l,
					 __u64 draw, __u32 *out)
{
	struct lt_walk_ctx c = {.svc = svc, .labels = labels, .l = l};
	__u32 p;

	l->draw = draw % 100 + 1;
	l->agg = 0;
	l->chosen = 0;
	l->chosen_deg = 0;
	if (l->draw > l->st.lh[0]) /* else P0 healthy, without a loop */
		bpf_loop(2 * l->st.n, lt_choose_cb, &c, 0);
	p = l->chosen;
	for (int i = 0; i < LT_PICK_SPANS; i++)
		l->pick[i] = (struct lt_span){0, 0};
	if (p >= LT_MAX_PRIO)
		return LT_STAT_BAD_INDEX;
	if (l->st.panic & (1U << p)) {
		lt_spans_of(l, 0, p, &l->pick[0]);
		lt_spans_of(l, 1, p, &l->pick[3]);
		lt_spans_of(l, 2, p, &l->pick[6]);
	} else {
		__u32 set = l->chosen_deg ? 1 : 0;
		int ret;

		lt_spans_of(l, set, p, &l->pick[0]);
		if (svc->loc_depth > l->st.rank[p]) { /* a locality first (locality.h) */
			__u32 k = set + (l->st.other[p] ? 2 : 0), base = svc->loc;

			for (__u32 j = 0; j < 4; j++)
				if (j < k)
					base += svc->loc_n[j];
			ret = lt_loc_pick(l, set, lt_loc_draw(l), base, svc->loc_n[k & 3]);
			if (ret != LT_OK)
				return ret;
		}
	}
	return lt_pick_spans(l, out);
}

/* lt_loads_in is lt_loads_compute for the service and labels in l, and
 * lt_pick_in lt_pick_loads: global functions, each checked once on its
 * own, not once per state its caller is in (lt_select). */
__noinline int lt_loads_in(struct lt_loads *l)
{
	if (!l)
		return LT_STAT_BAD_INDEX;
	return lt_loads_compute(&l->svc, l->labels, l);
}

__noinline int lt_pick_in(struct lt_loads *l, __u64 draw, __u32 *out)
{
	if (!l || !out)
		return LT_STAT_BAD_INDEX;
	return lt_pick_loads(&l->svc, l->labels, l, draw, out);
}

#endif /* LOCTREE_LIB_PRIORITY_H */
