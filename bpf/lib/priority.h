/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Envoy's priority load in the kernel (docs/FORMAT.md, "Priority load",
 * steps 1-6), for services whose lt_service.of is non-zero: three tree
 * walks (eligible, degraded, unhealthy; six with the network rule, whose
 * other-network trees rank the other networks' endpoints: "Network rule
 * with a priority load", or the other values of another first scope to
 * other_depth: "Copies by the first scope") record the
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

/* lt_trees is the number of trees the walk goes down: the three sets', and
 * with the network rule of a spillover service their other-network trees. */
static __always_inline __u32 lt_trees(const struct lt_service *svc)
{
	return svc->net_rule == 2 ? LT_TREES : LT_SETS;
}

/* lt_on_network says whether an endpoint of the service is on the
 * source's network: a walk of a set's own tree matched it. */
static __always_inline int lt_on_network(const struct lt_loads *l)
{
	return l->st.reach[0] >= 1 || l->st.reach[1] >= 1 || l->st.reach[2] >= 1;
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

	if (set >= LT_TREES || d >= LT_MAX_LEVELS || l->stop[set])
		return 0;
	lt_bounded(set);
	lt_tree_root(svc, set, &delta);
	n = lt_node_of(svc, l->st.node[set][d]);
	if (!n)
		return 1;
	ch = n->child_count ? lt_child_in(svc, n, delta, c->labels[d], &at, &bad) : NULL;
	/* An other-network tree has copies for every network of the service;
	 * a source on none of them takes otherNetwork's (shared/network.go). */
	if (!ch && !bad && set >= LT_SETS && d == 0 && n->child_count && !lt_on_network(l))
		ch = lt_child_in(svc, n, delta, LT_OTHER_NETWORK, &at, &bad);
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
		__u32 t = LT_SETS + set, at = 0;
		struct lt_node *d = x->child_count ? lt_child_in(svc, x, svc->aux_delta, set + 1, &at, &bad) : NULL;

		l->st.reach[t] = 0;
		l->stop[t] = d ? 0 : 1;
		l->st.node[t][0] = d ? at : svc->other_root;
		l->st.path[t][0] = lt_span_of(svc, d ? d : x, &bad);
		if (!d)
			l->st.path[t][0].hi = l->st.path[t][0].lo;
	}
	return bad ? LT_STAT_BAD_INDEX : LT_OK;
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
	if (trees == LT_TREES && lt_walk_other(svc, l) != LT_OK)
		return LT_STAT_BAD_INDEX;
	bpf_loop(trees * svc->levels, lt_level_cb, c, 0);
	if (c->bad)
		return LT_STAT_BAD_INDEX;
	for (int set = 0; set < LT_TREES; set++) { /* below the deepest match: the empty range at its lo */
		__u32 r = l->st.reach[set];

		if (set >= trees)
			break;
		/* Copies by a first scope other than network: the ranks below
		 * other_depth are one, as if the walk stopped there
		 * (shared/network.go walkOther). */
		if (set >= LT_SETS && r > svc->other_depth)
			l->st.reach[set] = r = svc->other_depth;
		if (r >= LT_DEPTHS)
			return LT_STAT_BAD_INDEX;
		lt_bounded(r);
		for (__u32 j = 1; j < LT_DEPTHS; j++) {
			if (j <= r)
				continue;
			l->st.path[set][j].lo = l->st.path[set][r].lo;
			l->st.path[set][j].hi = l->st.path[set][r].lo;
			l->st.node[set][j] = l->st.node[set][r];
		}
	}
	return LT_OK;
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
 * the sets' trees (i below LT_MAX_LEVELS+1) or of their other-network
 * trees, the failover rule's rank split in two; ranks below min_rank are
 * none, and with the network rule rank 0 of the sets' trees is the
 * other-network trees' priorities (steps 2-3). */
static long lt_rank_cb(__u64 i, void *data)
{
	struct lt_walk_ctx *c = data;
	struct lt_loads *l = c->l;
	__u32 other = i > LT_MAX_LEVELS, b = other ? LT_SETS : 0;
	int r = (int)c->svc->levels - (int)(other ? i - LT_MAX_LEVELS - 1 : i);
	int lowest = c->svc->net_rule == 2 ? 1 : (int)c->svc->min_rank;
	struct lt_hosts n;

	if (i > 2 * LT_MAX_LEVELS + 1 || r < 0 || r < lowest)
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
	bpf_loop((LT_MAX_LEVELS + 1) * (svc->net_rule == 2 ? 2 : 1), lt_rank_cb, &c, 0);
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
	if (l->st.other[p])
		set += LT_SETS;
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
