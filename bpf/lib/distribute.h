/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Istio's localityLbSetting.distribute in the kernel (docs/FORMAT.md
 * "Distribute"), for a service with a priority load and distribute rules
 * (lt_service.dist_count > 0). A rule's priority depends on the source only
 * through which rule applies, so the loader installs each rule's
 * precomputed one priority (shared.Service.RuleLoads) as a block of node
 * records in the service's node region, where the failover rules would be:
 * dist_count rule blocks, then the block of a source no rule applies to.
 * A block is LT_DIST_STRIDE records:
 *
 *   0: label the from pattern's first fixed segment, lo its segment count
 *      (0..3; 0 is `*` and the last block), hi the targets (1..8),
 *      first_child the healthy load | degraded load << 8 | panic << 16 |
 *      "has endpoints" << 24;
 *   1, 2: label the from pattern's second and third segment; record 1's lo,
 *      hi and first_child the priority's healthy, degraded and total counts;
 *      record 2's lo the offset of the rule's locality records from
 *      lt_service.loc, hi and first_child their eligible and degraded counts;
 *   3 + 3·t + set: target t's endpoints in set (eligible, degraded,
 *      unhealthy) as endpoint record indices in lo and hi, and in label its
 *      effective weight for that availability (2^20 = 1; 0 for unhealthy).
 *
 * A connect matches the blocks' from prefixes in order (Istio's
 * applyLocalityWeights takes the first matching rule), draws healthy or
 * degraded by the priority's loads (Envoy's choosePriority with one
 * priority), then a target by its effective weight for that availability
 * (the sum of its localities'), then a locality of the target by its
 * effective weight under the rule (locality.h over the rule's block of
 * locality records: Istio's per-locality distribute weight times Envoy's
 * per-locality health, issue 26 item 5; together Envoy's locality
 * scheduler), and picks by the policy in the locality's span; in panic
 * among every target's endpoints, and with no effective weight among every
 * target's endpoints of that availability. O(rules + targets + log
 * localities), every index checked against the service's regions.
 *
 * The locality records (from lt_service.loc): one block per rule block, in
 * the same order, each the eligible set's localities then the degraded
 * set's that have a weight under the rule, in endpoint order, label the
 * running sum of the rule's effective locality weights (a locality left
 * out adds 0 to it, so the sums stay right).
 */
#ifndef LOCTREE_LIB_DISTRIBUTE_H
#define LOCTREE_LIB_DISTRIBUTE_H

#include "common.h"
#include "maps.h"
#include "pick.h"
#include "affinity.h"
#include "loads.h"
#include "spans.h"
#include "locality.h"

#define LT_DIST_FROM 3 /* a pattern's fixed segments: region, zone, subzone */
#define LT_DIST_STRIDE (LT_DIST_FROM + LT_SETS * LT_DIST_TARGETS)
#define LT_AFF_TARGET_SALT 0xbb67ae8584caa73bULL /* consistent_hash: a target draw of its own */

/* lt_dist_rule_cb tests rule block i's from against the source labels and
 * stops at the first that matches (l->dist_at, l->rule). */
static long lt_dist_rule_cb(__u64 i, void *data)
{
	struct lt_walk_ctx *c = data;
	const struct lt_service *svc = c->svc;
	__u32 at = svc->rules + (__u32)i * LT_DIST_STRIDE;
	struct lt_node *h = lt_node_of(svc, at), *seg;
	__u32 n;

	if (!h || h->lo > LT_DIST_FROM) {
		c->bad = 1;
		return 1;
	}
	n = h->lo;
	for (__u32 j = 0; j < LT_DIST_FROM; j++) {
		if (j >= n)
			break;
		seg = lt_node_of(svc, at + j);
		if (!seg) {
			c->bad = 1;
			return 1;
		}
		if (seg->label != c->labels[j])
			return 0;
	}
	c->l->dist_at = at;
	c->l->rule = i < svc->dist_count ? i + 1 : 0;
	c->l->dist_found = 1;
	return 1;
}

/* lt_dist_rec is record r of the rule block (a target's span in one set)
 * as map indices, or NULL when it leaves the service's regions. */
static __always_inline struct lt_node *lt_dist_rec(struct lt_walk_ctx *c, __u32 r, struct lt_span *s)
{
	const struct lt_service *svc = c->svc;
	struct lt_node *n = lt_node_of(svc, c->l->dist_at + LT_DIST_FROM + r);
	int bad = 0;

	if (!n)
		return NULL;
	if (n->hi == n->lo) { /* no endpoint in the set: wherever the loader put it */
		*s = (struct lt_span){0, 0};
		return n;
	}
	*s = lt_span_of(svc, n, &bad);
	return bad ? NULL : n;
}

/* lt_dist_span_cb copies spans into l->pick: of every target in every set
 * (l->dist_set == LT_SETS: span i is target i/3's in set i%3), or of target
 * i in set l->dist_set. */
static long lt_dist_span_cb(__u64 i, void *data)
{
	struct lt_walk_ctx *c = data;
	struct lt_loads *l = c->l;
	__u32 set = l->dist_set, r = set >= LT_SETS ? i : i * LT_SETS + set;

	if (i >= LT_PICK_SPANS || r >= LT_SETS * LT_DIST_TARGETS)
		return 1;
	lt_bounded(i);
	if (!lt_dist_rec(c, r, &l->pick[i])) {
		c->bad = 1;
		return 1;
	}
	return 0;
}

/* lt_dist_weight_cb sums the targets' effective weights in l->dist_set
 * (l->wfind 0), or finds the target that holds the point l->wx (l->wfind
 * 1), as lt_weight_cb does for spans. */
static long lt_dist_weight_cb(__u64 i, void *data)
{
	struct lt_walk_ctx *c = data;
	struct lt_loads *l = c->l;
	struct lt_span s;
	struct lt_node *n = lt_dist_rec(c, i * LT_SETS + (l->dist_set & 1), &s);

	if (!n) {
		c->bad = 1;
		return 1;
	}
	if (!l->wfind) {
		l->wsum += n->label;
		return 0;
	}
	if (l->wx < n->label) {
		l->target = i;
		return 1;
	}
	l->wx -= n->label;
	return 0;
}

/* lt_dist_draw fills l->pick with the spans a pick draws from (step 3). */
static __always_inline int lt_dist_draw(struct lt_loads *l, struct lt_walk_ctx *c, __u32 targets)
{
	struct lt_node *blk;
	__u32 set;

	l->target = -1;
	if (l->st.panic) { /* every target's endpoints, all sets */
		l->dist_set = LT_SETS;
		bpf_loop(targets * LT_SETS, lt_dist_span_cb, c, 0);
		return c->bad ? LT_STAT_BAD_INDEX : LT_OK;
	}
	l->dist_set = l->chosen_deg;
	l->wsum = 0;
	l->wfind = 0;
	bpf_loop(targets, lt_dist_weight_cb, c, 0);
	if (c->bad)
		return LT_STAT_BAD_INDEX;
	if (l->wsum == 0) { /* no scheduler: every target's endpoints of the set */
		bpf_loop(targets, lt_dist_span_cb, c, 0);
		return c->bad ? LT_STAT_BAD_INDEX : LT_OK;
	}
	l->wx = (l->svc.policy == LT_POLICY_CONSISTENT_HASH ? lt_mix64(l->aff_hash ^ LT_AFF_TARGET_SALT) : lt_rand64()) % l->wsum;
	l->wfind = 1;
	bpf_loop(targets, lt_dist_weight_cb, c, 0);
	if (c->bad || l->target < 0 || l->target >= LT_DIST_TARGETS)
		return LT_STAT_BAD_INDEX;
	if (!lt_dist_rec(c, (__u32)l->target * LT_SETS + l->chosen_deg, &l->pick[0]))
		return LT_STAT_BAD_INDEX;
	if (!l->svc.loc_depth) /* no locality records: the target's span */
		return LT_OK;
	blk = lt_node_of(&l->svc, l->dist_at + 2);
	if (!blk)
		return LT_STAT_BAD_INDEX;
	set = l->chosen_deg ? 1 : 0;
	return lt_loc_pick(l, set, lt_loc_draw(l), l->svc.loc + blk->lo + (set ? blk->hi : 0), set ? blk->first_child : blk->hi);
}

/* lt_dist_head reads the applying rule's priority from its block. */
static __always_inline int lt_dist_head(const struct lt_service *svc, struct lt_loads *l, __u32 *targets)
{
	struct lt_node *h = lt_node_of(svc, l->dist_at), *cnt = lt_node_of(svc, l->dist_at + 1);
	__u32 f;

	if (!h || !cnt || h->hi == 0 || h->hi > LT_DIST_TARGETS)
		return LT_STAT_BAD_INDEX;
	f = h->first_child;
	if (!(f >> 24 & 1))
		return LT_STAT_NO_CANDIDATE;
	*targets = h->hi;
	l->st.n = 1;
	l->st.lh[0] = f & 0xff;
	l->st.ld[0] = f >> 8 & 0xff;
	l->st.panic = f >> 16 & 1;
	l->st.healthy[0] = cnt->lo;
	l->st.degraded[0] = cnt->hi;
	l->st.total[0] = cnt->first_child;
	return LT_OK;
}

/*
 * lt_dist_in picks for a service with distribute rules, the service and the
 * source labels in l; the candidate range for a kept backend is the
 * eligible tree's (l->st.path[0][0]), as for a priority load without bound.
 * A global function, as lt_loads_in.
 */
__noinline int lt_dist_in(struct lt_loads *l, __u32 *out)
{
	struct lt_walk_ctx c = {};
	const struct lt_service *svc;
	struct lt_node *root;
	__u32 targets = 0, draw;
	int bad = 0, ret;

	if (!l || !out)
		return LT_STAT_BAD_INDEX;
	svc = &l->svc;
	c.svc = svc;
	c.labels = l->labels;
	c.l = l;
	root = lt_node_of(svc, svc->root);
	if (!root)
		return LT_STAT_BAD_INDEX;
	l->st.path[0][0] = lt_span_of(svc, root, &bad);
	l->st.node[0][0] = svc->root;
	l->st.reach[0] = 0;
	l->st.n = 0;
	l->rule = 0;
	l->dist_found = 0;
	for (int i = 0; i < LT_PICK_SPANS; i++)
		l->pick[i] = (struct lt_span){0, 0};
	bpf_loop((__u32)svc->dist_count + 1, lt_dist_rule_cb, &c, 0);
	if (bad || c.bad || !l->dist_found)
		return LT_STAT_BAD_INDEX;
	ret = lt_dist_head(svc, l, &targets);
	if (ret != LT_OK)
		return ret;
	draw = lt_draw(l) % 100 + 1; /* choosePriority, one priority */
	l->chosen = 0;
	l->chosen_deg = draw > l->st.lh[0] && draw <= (__u32)l->st.lh[0] + l->st.ld[0];
	ret = lt_dist_draw(l, &c, targets);
	if (ret != LT_OK)
		return ret;
	return lt_pick_spans(l, out);
}

#endif /* LOCTREE_LIB_DISTRIBUTE_H */
