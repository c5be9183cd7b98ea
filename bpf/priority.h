/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Envoy's priority load in the kernel (docs/FORMAT.md, "Priority load",
 * steps 1-6), for services whose lt_service.of is non-zero: three tree
 * walks (eligible, degraded, unhealthy) record the source's range at every
 * depth; the priorities are the ranks, deepest first, each at most two
 * spans per set (three where a failover rule splits the region's rank);
 * their loads follow Envoy's recalculatePerPriorityState and panic rules in
 * integers; choosePriority draws one and the service's policy picks inside
 * its spans. O(levels x log branching), no loop over endpoints.
 *
 * The state of one computation (about 600 bytes) does not fit the BPF stack
 * beside lt_redirect's, so it lives in a per-CPU scratch slot. A cgroup
 * socket hook may be preempted (CONFIG_PREEMPT_RCU) by another task's
 * connect on the same CPU, so a slot is taken with a compare-and-swap and
 * given back at the end; with every slot of the CPU taken the connect is
 * refused (LT_STAT_SCRATCH_BUSY), never computed on a shared slot.
 */
#ifndef LOCTREE_PRIORITY_H
#define LOCTREE_PRIORITY_H

#include "loctree.h"
#include "affinity.h"

/* Mixed into a consistent_hash client's hash to draw its priority (and a
 * distribute target): the draw and the jump hash inside the priority must
 * not be the same number. */
#define LT_AFF_PRIO_SALT 0x6a09e667f3bcc909ULL

#define LT_SETS 3                       /* eligible, degraded, unhealthy */
#define LT_DEPTHS (LT_MAX_LEVELS + 2)   /* a range per depth 0..levels, and an empty one below */
#define LT_MAX_PRIO (LT_MAX_LEVELS + 2) /* one per rank, and one more where a failover rule splits */
#define LT_SPANS 3                      /* spans of one set in one priority */
#define LT_DIST_TARGETS 8 /* targets of a distribute rule (shared.MaxDistributeTargets) */
#define LT_PICK_SPANS (LT_SETS * LT_DIST_TARGETS) /* >= LT_SETS * LT_SPANS */
#define LT_SCRATCH_SLOTS 4

/* lt_bounded makes the compiler use the register a bounds check just
 * checked (the verifier tracks bounds per register). */
#define lt_bounded(x) asm volatile("" : "+r"(x))

enum lt_failover_kind {
	LT_FO_NONE = 0, /* a priority no failover rule touches */
	LT_FO_TO = 1,   /* the rule's to-region */
	LT_FO_REST = 2, /* the other regions of the split rank */
};

struct lt_span {
	__u32 lo;
	__u32 hi;
};

/* The priority loads of one source: map indices, percentages. */
struct lt_loads {
	__u32 busy; /* 1 while a program computes in this slot */
	__u32 n;    /* priorities */
	struct lt_span path[LT_SETS][LT_DEPTHS];
	__u32 node[LT_SETS][LT_DEPTHS]; /* the node at each depth (the deepest reached below) */
	__u32 reach[LT_SETS];           /* depth each walk reached */
	struct lt_span to[LT_SETS];     /* the failover rule's to-region in each set */
	__u32 healthy[LT_MAX_PRIO];
	__u32 degraded[LT_MAX_PRIO];
	__u32 total[LT_MAX_PRIO];
	__u8 rank[LT_MAX_PRIO];
	__u8 kind[LT_MAX_PRIO];  /* enum lt_failover_kind */
	__u8 lh[LT_MAX_PRIO];    /* healthy load, percent */
	__u8 ld[LT_MAX_PRIO];    /* degraded load, percent */
	__u32 panic;             /* bit p: priority p is in panic */
	struct lt_span pick[LT_PICK_SPANS]; /* the chosen priority's spans */
	__u32 stop[LT_SETS];     /* the walk of a tree has ended */
	__u64 to_label;          /* the failover rule's to-region */
	__s32 split;             /* the rank a failover rule splits, or -1 */
	__u32 sum, nta, rem;     /* availabilities: sum, normalized total; load left */
	__s32 first_h, first_d;  /* first priority with healthy (degraded) availability */
	__u32 hsum;              /* healthy availabilities of the priorities before hfirst */
	__s32 hfirst;            /* where the healthy availabilities reach 100, or -1 */
	__u64 hosts;
	__u32 avail_h[LT_MAX_PRIO];
	__u32 avail_d[LT_MAX_PRIO];
	__u64 draw, agg;         /* choosePriority's h%100+1 and running sum */
	__u32 chosen, chosen_deg;
	__u32 k, k2, at, at2;    /* lt_at */
	__u8 at_found, at2_found;
	__u64 wsum, wx;          /* weighted pick over spans */
	__u32 wfind, wspan;
	__u32 rule;              /* distribute: k+1 when rule k applies, 0 when none does */
	__s32 target;            /* distribute: the drawn target, -1 for every target's endpoints */
	__u32 dist_at;           /* distribute: map index of the applying rule's block */
	__u32 dist_found;
	__u32 dist_set;          /* distribute: the set drawn from, LT_SETS for all */
	struct lt_aff_key aff;   /* consistent_hash: the client and the service (affinity.h) */
	__u64 aff_hash;          /* consistent_hash: lt_aff_hash(&aff) */
	struct lt_service svc;   /* the one copy of the published value this computation reads */
	__u64 labels[LT_MAX_LEVELS]; /* a cgroup's own source labels */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LT_SCRATCH_SLOTS);
	__type(key, __u32);
	__type(value, struct lt_loads);
} lt_prio_scratch SEC(".maps");

/*
 * Picks by priority (per CPU): entry 2·p + 0 counts the connects and
 * datagrams given a new backend from priority p's healthy (or, in panic,
 * all) endpoints, 2·p + 1 from its degraded ones. A socket that keeps its
 * backend is not a new pick.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2 * LT_MAX_PRIO);
	__type(key, __u32);
	__type(value, __u64);
} lt_prio_picks SEC(".maps");

static __always_inline void lt_count_prio(__u32 p, __u32 degraded)
{
	__u32 k = 2 * p + (degraded ? 1 : 0);
	__u64 *v = bpf_map_lookup_elem(&lt_prio_picks, &k);

	if (v)
		*v += 1;
}

/* lt_loads_try takes scratch slot i of this CPU if it is free. */
static __always_inline struct lt_loads *lt_loads_try(__u32 i)
{
	struct lt_loads *l = bpf_map_lookup_elem(&lt_prio_scratch, &i);

	return l && __sync_val_compare_and_swap(&l->busy, 0, 1) == 0 ? l : NULL;
}

/* lt_loads_take returns a free scratch slot of this CPU, taken, or NULL.
 * Written out, not a loop: a loop's counter kept on the stack may lose its
 * bound before the verifier sees the loop end. */
static __always_inline struct lt_loads *lt_loads_take(void)
{
	struct lt_loads *l = lt_loads_try(0);

	if (!l)
		l = lt_loads_try(1);
	if (!l)
		l = lt_loads_try(2);
	if (!l)
		l = lt_loads_try(3);
	return l;
}

_Static_assert(LT_SCRATCH_SLOTS == 4, "lt_loads_take tries every slot");

static __always_inline void lt_loads_give(struct lt_loads *l)
{
	__sync_lock_test_and_set(&l->busy, 0);
}

/* lt_span_of is a node's endpoint range as map indices; *bad is set when it
 * leaves the service's endpoint region. */
static __always_inline struct lt_span lt_span_of(const struct lt_service *svc, const struct lt_node *n, int *bad)
{
	struct lt_span s = {n->lo + svc->ep_delta, n->hi + svc->ep_delta};

	if (s.hi < s.lo || s.lo - svc->ep_base > svc->ep_len || s.hi - svc->ep_base > svc->ep_len)
		*bad = 1;
	return s;
}

struct lt_walk_ctx {
	const struct lt_service *svc;
	const __u64 *labels;
	struct lt_loads *l;
	int bad;
};

/* lt_tree_root is the map index of set's root, and the delta of its records. */
static __always_inline __u32 lt_tree_root(const struct lt_service *svc, __u32 set, __u32 *delta)
{
	*delta = set == 0 ? svc->node_delta : svc->aux_delta;
	return set == 0 ? svc->root : svc->aux_root[(set - 1) & 1];
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

	if (set >= LT_SETS || d >= LT_MAX_LEVELS || l->stop[set])
		return 0;
	lt_tree_root(svc, set, &delta);
	n = lt_node_of(svc, l->node[set][d]);
	if (!n)
		return 1;
	ch = n->child_count ? lt_child_in(svc, n, delta, c->labels[d], &at, &bad) : NULL;
	if (bad)
		return 1;
	if (!ch) {
		l->stop[set] = 1;
		return 0;
	}
	l->path[set][d + 1] = lt_span_of(svc, ch, &bad);
	l->node[set][d + 1] = at;
	l->reach[set] = d + 1;
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
	if (d >= LT_MAX_LEVELS || set >= LT_SETS)
		return 1;
	if (lt_step(c, set, d)) {
		c->bad = 1;
		return 1;
	}
	return 0;
}

/* lt_walk walks the three trees with the source's labels. */
static __always_inline int lt_walk(const struct lt_service *svc, struct lt_loads *l, struct lt_walk_ctx *c)
{
	int bad = 0;

	for (__u32 set = 0; set < LT_SETS; set++) {
		__u32 delta, idx = lt_tree_root(svc, set, &delta);
		struct lt_node *n = lt_node_of(svc, idx);

		if (!n)
			return LT_STAT_BAD_INDEX;
		l->path[set][0] = lt_span_of(svc, n, &bad);
		l->node[set][0] = idx;
		l->reach[set] = 0;
		l->stop[set] = 0;
	}
	if (bad)
		return LT_STAT_BAD_INDEX;
	bpf_loop(LT_SETS * svc->levels, lt_level_cb, c, 0);
	if (c->bad)
		return LT_STAT_BAD_INDEX;
	for (int set = 0; set < LT_SETS; set++) { /* below the deepest match: the empty range at its lo */
		__u32 r = l->reach[set];

		if (r >= LT_DEPTHS)
			return LT_STAT_BAD_INDEX;
		lt_bounded(r);
		for (__u32 j = 1; j < LT_DEPTHS; j++) {
			if (j <= r)
				continue;
			l->path[set][j].lo = l->path[set][r].lo;
			l->path[set][j].hi = l->path[set][r].lo;
			l->node[set][j] = l->node[set][r];
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

	if (set >= LT_SETS || g >= LT_MAX_LEVELS)
		return 1;
	lt_bounded(set);
	lt_bounded(g);
	l->to[set].lo = l->path[set][g].lo;
	l->to[set].hi = l->to[set].lo;
	if (l->reach[set] < g)
		return 0;
	lt_tree_root(svc, set, &delta);
	n = lt_node_of(svc, l->node[set][g]);
	if (!n)
		goto bad;
	ch = lt_child_in(svc, n, delta, l->to_label, &at, &bad);
	if (bad)
		goto bad;
	if (ch)
		l->to[set] = lt_span_of(svc, ch, &bad);
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
	bpf_loop(LT_SETS, lt_to_cb, c, 0);
	if (c->bad)
		return LT_STAT_BAD_INDEX;
	l->split = g;
	return LT_OK;
}

static __always_inline __u32 lt_len(struct lt_span s)
{
	return s.hi - s.lo;
}

/* lt_count_rank is the number of endpoints of a set whose rank is exactly
 * r: range(r) minus the nested range(r+1) (step 2). */
static __always_inline __u32 lt_count_rank(const struct lt_loads *l, __u32 set, __u32 r)
{
	const struct lt_span *a;

	if (set >= LT_SETS || r >= LT_DEPTHS - 1)
		return 0;
	lt_bounded(set);
	lt_bounded(r);
	a = &l->path[set][r];
	return lt_len(a[0]) - lt_len(a[1]);
}

/* lt_add appends a priority unless it has no endpoint (step 3). */
static __always_inline __u32 lt_avail(__u32 of, __u32 n, __u32 total);

/* lt_add appends a priority unless it has no endpoint (step 3). While the
 * healthy availabilities so far sum to less than 100 it adds this one's:
 * where they reach 100, every load is known without the rest of step 4
 * (lt_distribute's common case). */
static __always_inline void lt_add(struct lt_loads *l, __u32 of, __u32 rank, __u8 kind, __u32 h, __u32 d, __u32 u)
{
	__u32 p = l->n, a;

	if (h + d + u == 0 || p >= LT_MAX_PRIO)
		return;
	lt_bounded(p);
	l->rank[p] = rank;
	l->kind[p] = kind;
	l->healthy[p] = h;
	l->degraded[p] = d;
	l->total[p] = h + d + u;
	l->n = p + 1;
	if (l->hfirst >= 0)
		return;
	a = lt_avail(of, h, h + d + u);
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

/* lt_rank_cb adds the priorities of rank levels-i, the failover rule's rank
 * split in two; ranks below min_rank are none (steps 2-3). */
static long lt_rank_cb(__u64 i, void *data)
{
	struct lt_walk_ctx *c = data;
	struct lt_loads *l = c->l;
	int r = (int)c->svc->levels - (int)i;
	__u32 h, d, u;

	if (i > LT_MAX_LEVELS || r < 0 || r < (int)c->svc->min_rank)
		return 1;
	h = lt_count_rank(l, 0, r);
	d = lt_count_rank(l, 1, r);
	u = lt_count_rank(l, 2, r);
	if (r == l->split) {
		__u32 th = lt_len(l->to[0]), td = lt_len(l->to[1]), tu = lt_len(l->to[2]);

		lt_add(l, c->svc->of, r, LT_FO_TO, th, td, tu);
		lt_add(l, c->svc->of, r, LT_FO_REST, h - th, d - td, u - tu);
		return 0;
	}
	lt_add(l, c->svc->of, r, LT_FO_NONE, h, d, u);
	return 0;
}

/* lt_avail is Envoy's per-priority health (or degraded) value,
 * min(100, of*n/total). */
static __always_inline __u32 lt_avail(__u32 of, __u32 n, __u32 total)
{
	__u64 v;

	if (total == 0)
		return 0;
	v = (__u64)of * n / total;
	return v > 100 ? 100 : (__u32)v;
}

/* lt_avail_cb computes priority i's availabilities and their sum (step 4). */
static long lt_avail_cb(__u64 i, void *data)
{
	struct lt_walk_ctx *c = data;
	struct lt_loads *l = c->l;
	__u32 p = i;

	if (p >= LT_MAX_PRIO || p >= l->n)
		return 1;
	lt_bounded(p);
	l->avail_h[p] = lt_avail(c->svc->of, l->healthy[p], l->total[p]);
	l->avail_d[p] = lt_avail(c->svc->of, l->degraded[p], l->total[p]);
	l->sum += l->avail_h[p] + l->avail_d[p];
	return 0;
}

/* lt_spread_cb is Envoy's distributeLoad, healthy loads first (i < n),
 * then degraded: as much of the rest as each priority's
 * availability allows, in priority order. */
static long lt_spread_cb(__u64 i, void *data)
{
	struct lt_loads *l = ((struct lt_walk_ctx *)data)->l;
	int deg = i >= l->n;
	__u32 p = deg ? i - l->n : i, a, x;

	if (p >= LT_MAX_PRIO || p >= l->n || l->nta == 0)
		return 0;
	lt_bounded(p);
	a = deg ? l->avail_d[p] : l->avail_h[p];
	x = a * 100 / l->nta;
	x = x < l->rem ? x : l->rem;
	if (deg) {
		if (l->first_d < 0 && a > 0)
			l->first_d = p;
		l->ld[p] = x;
	} else {
		if (l->first_h < 0 && a > 0)
			l->first_h = p;
		l->lh[p] = x;
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

	if (p >= LT_MAX_PRIO || p >= l->n)
		return 1;
	lt_bounded(p);
	if (100 * ((__u64)l->healthy[p] + l->degraded[p]) < (__u64)c->svc->panic * l->total[p])
		l->panic |= 1U << p;
	l->hosts += l->total[p];
	return 0;
}

/* lt_share_cb gives priority i its share of all hosts (total panic, Envoy's
 * recalculateLoadInTotalPanic). */
static long lt_share_cb(__u64 i, void *data)
{
	struct lt_loads *l = ((struct lt_walk_ctx *)data)->l;
	__u32 p = i, x;

	if (p >= LT_MAX_PRIO || p >= l->n || l->hosts == 0)
		return 1;
	lt_bounded(p);
	x = 100 * (__u64)l->total[p] / l->hosts;
	l->lh[p] = x;
	l->ld[p] = 0;
	l->rem -= x;
	return 0;
}

/* lt_distribute computes the loads from the counts (steps 4-5, Envoy's
 * recalculatePerPriorityState and recalculatePerPriorityPanic). */
static __always_inline void lt_distribute(const struct lt_service *svc, struct lt_loads *l, struct lt_walk_ctx *c)
{
	__s32 fh, fd;

	for (int p = 0; p < LT_MAX_PRIO; p++) {
		l->lh[p] = 0;
		l->ld[p] = 0;
	}
	fh = l->hfirst;
	if (fh >= 0 && fh < LT_MAX_PRIO) {
		/* The healthy availabilities of P0..fh reach 100: the normalized
		 * total is 100, each takes its availability, fh the rest, the
		 * others and every degraded load 0, no panic (Envoy's
		 * computation, exactly, as shared's healthyFirst). */
		for (int p = 0; p < LT_MAX_PRIO; p++)
			if (p < fh)
				l->lh[p] = l->avail_h[p];
		l->lh[fh] = 100 - l->hsum;
		return;
	}
	l->sum = 0;
	bpf_loop(l->n, lt_avail_cb, c, 0);
	l->nta = l->sum > 100 ? 100 : l->sum;
	l->rem = 100;
	l->first_h = -1;
	l->first_d = -1;
	bpf_loop(2 * l->n, lt_spread_cb, c, 0);
	fh = l->first_h;
	fd = l->first_d;
	if (l->nta > 0 && l->rem > 0 && fh >= 0 && fh < LT_MAX_PRIO)
		l->lh[fh] += l->rem;
	else if (l->nta > 0 && l->rem > 0 && fd >= 0 && fd < LT_MAX_PRIO)
		l->ld[fd] += l->rem;
	if (svc->panic == 0 && l->nta == 0) {
		l->lh[0] = 100;
		return;
	}
	if (l->nta == 100)
		return;
	l->hosts = 0;
	bpf_loop(l->n, lt_panic_cb, c, 0);
	if (l->n > LT_MAX_PRIO || l->panic != (1U << l->n) - 1 || l->hosts == 0)
		return;
	l->rem = 100;
	bpf_loop(l->n, lt_share_cb, c, 0);
	l->lh[0] += l->rem;
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

	l->n = 0;
	l->panic = 0;
	l->hsum = 0;
	l->hfirst = -1;
	ret = lt_walk(svc, l, &c);
	if (ret == LT_OK)
		ret = lt_failover(svc, labels, l, &c);
	if (ret != LT_OK)
		return ret;
	bpf_loop(LT_MAX_LEVELS + 1, lt_rank_cb, &c, 0);
	if (l->n == 0)
		return LT_STAT_NO_CANDIDATE;
	lt_distribute(svc, l, &c);
	return LT_OK;
}

/* lt_choose_cb is one step of Envoy's choosePriority: l->draw (h%100+1)
 * against the cumulative healthy loads, then the degraded ones. */
static long lt_choose_cb(__u64 i, void *data)
{
	struct lt_loads *l = ((struct lt_walk_ctx *)data)->l;
	int deg = i >= l->n;
	__u32 p = deg ? i - l->n : i;

	if (p >= LT_MAX_PRIO || p >= l->n)
		return 0;
	lt_bounded(p);
	l->agg += deg ? l->ld[p] : l->lh[p];
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
	lt_bounded(set);
	lt_bounded(p);
	r = l->rank[p];
	if (r >= LT_DEPTHS - 1)
		return;
	lt_bounded(r);
	a = l->path[set][r];
	b = l->path[set][r + 1];
	to = l->to[set];
	if (l->kind[p] == LT_FO_TO) {
		out[0] = to;
		out[1] = (struct lt_span){to.hi, to.hi};
		out[2] = out[1];
		return;
	}
	if (l->kind[p] == LT_FO_REST && to.hi > to.lo) {
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

/* lt_at_cb is one span of lt_at: the k-th and the k2-th endpoint of the
 * pick spans, one pass. */
static long lt_at_cb(__u64 i, void *data)
{
	struct lt_loads *l = ((struct lt_walk_ctx *)data)->l;
	__u32 n;

	if (i >= LT_PICK_SPANS)
		return 1;
	lt_bounded(i);
	n = lt_len(l->pick[i]);
	if (l->k < n && !l->at_found) {
		l->at = l->pick[i].lo + l->k;
		l->at_found = 1;
	}
	if (l->k2 < n && !l->at2_found) {
		l->at2 = l->pick[i].lo + l->k2;
		l->at2_found = 1;
	}
	l->k -= n;
	l->k2 -= n;
	return l->at_found && l->at2_found;
}

/* lt_at resolves positions k and k2 (each below the spans' total) of the
 * pick spans as one list into endpoints l->at and l->at2. */
static __always_inline void lt_at(struct lt_loads *l, struct lt_walk_ctx *c, __u32 k, __u32 k2)
{
	l->k = k;
	l->k2 = k2;
	l->at = 0;
	l->at2 = 0;
	l->at_found = 0;
	l->at2_found = 0;
	bpf_loop(LT_PICK_SPANS, lt_at_cb, c, 0);
}

/* lt_span_weight is the weight of a non-empty span, from the prefix sums. */
static __always_inline __u64 lt_span_weight(struct lt_span s)
{
	struct lt_endpoint *first, *last;

	if (s.hi <= s.lo)
		return 0;
	first = lt_ep_at(s.lo);
	last = lt_ep_at(s.hi - 1);
	if (!first || !last)
		return 0;
	return last->cum_weight - first->cum_weight + first->weight;
}

/* lt_weight_cb sums the span weights (l->wfind 0), or finds the span that
 * holds the point l->wx (l->wfind 1). */
static long lt_weight_cb(__u64 i, void *data)
{
	struct lt_loads *l = ((struct lt_walk_ctx *)data)->l;
	__u64 w;

	if (i >= LT_PICK_SPANS)
		return 1;
	lt_bounded(i);
	w = lt_span_weight(l->pick[i]);
	if (!l->wfind) {
		l->wsum += w;
		return 0;
	}
	if (l->wx < w) {
		l->wspan = i;
		return 1;
	}
	l->wx -= w;
	return 0;
}

/* lt_pick_spans_weighted draws a span by its weight, then an endpoint in it
 * by weight: together, proportional to the endpoint weights. */
static __always_inline int lt_pick_spans_weighted(struct lt_loads *l, struct lt_walk_ctx *c, __u32 total, __u32 *out)
{
	__u32 w;

	l->wsum = 0;
	l->wfind = 0;
	bpf_loop(LT_PICK_SPANS, lt_weight_cb, c, 0);
	if (l->wsum == 0) { /* weightless: uniform */
		__u32 k = bpf_get_prandom_u32() % total;

		lt_at(l, c, k, k);
		*out = l->at;
		return LT_OK;
	}
	l->wx = lt_rand64() % l->wsum;
	l->wfind = 1;
	l->wspan = LT_PICK_SPANS;
	bpf_loop(LT_PICK_SPANS, lt_weight_cb, c, 0);
	w = l->wspan;
	if (w >= LT_PICK_SPANS)
		return LT_STAT_BAD_INDEX;
	return lt_pick_weighted(l->pick[w].lo, l->pick[w].hi, out);
}

/* lt_in_pick reports whether endpoint idx lies in one of the pick spans. */
static __always_inline int lt_in_pick(const struct lt_loads *l, __u32 idx)
{
	for (int i = 0; i < LT_PICK_SPANS; i++)
		if (idx >= l->pick[i].lo && idx < l->pick[i].hi)
			return 1;
	return 0;
}

/* lt_aff_in reports whether endpoint idx is backend b and in the pick spans. */
static __always_inline int lt_aff_in(const struct lt_loads *l, __u32 idx, const struct lt_addr *b)
{
	struct lt_endpoint *ep;

	if (!lt_in_pick(l, idx))
		return 0;
	ep = lt_ep_at(idx);
	return ep && ep->addr[0] == b->addr[0] && ep->addr[1] == b->addr[1] && ep->addr[2] == b->addr[2] &&
	       ep->addr[3] == b->addr[3] && ep->port == b->port && ep->family == b->family;
}

/*
 * lt_affinity_spans is lt_affinity_pick (affinity.h) over the pick spans
 * as one list: the client's backend while its affinity lasts and it is in
 * them (at its last index, else found by address), else the jump hash of
 * (client, service) over them, which becomes the client's backend.
 */
static __always_inline int lt_affinity_spans(struct lt_loads *l, struct lt_walk_ctx *c, __u32 total, __u32 *out)
{
	__u64 now = bpf_ktime_get_ns();
	struct lt_aff *a = bpf_map_lookup_elem(&lt_affinity, &l->aff);
	struct lt_aff_ep_key k = {};
	__u32 *idx;

	if (lt_aff_live(&l->svc, a, now)) {
		k.fe = l->aff.fe;
		k.backend = a->backend;
		idx = lt_aff_in(l, a->ep, &a->backend) ? &a->ep : bpf_map_lookup_elem(&lt_aff_eps, &k);
		if (idx && lt_aff_in(l, *idx, &a->backend)) {
			*out = *idx;
			a->ep = *out;
			a->last_ns = now;
			return LT_OK;
		}
	}
	lt_at(l, c, 0, lt_jump(l->aff_hash, total));
	*out = l->at2;
	return lt_aff_start(&l->aff, *out, now);
}

/* lt_pick_spans applies the service's policy to the chosen spans (lt_pick's
 * policies over several spans treated as one list). A global function, as
 * lt_select: the priority and the distribute path both call it. */
__noinline int lt_pick_spans(struct lt_loads *l, __u32 *out)
{
	struct lt_walk_ctx ctx = {}, *c = &ctx;
	const struct lt_service *svc;
	__u32 total = 0, a, b;

	if (!l || !out)
		return LT_STAT_BAD_INDEX;
	svc = &l->svc;
	ctx.svc = svc;
	ctx.labels = l->labels;
	ctx.l = l;

	for (int i = 0; i < LT_PICK_SPANS; i++)
		total += lt_len(l->pick[i]);
	if (total == 0)
		return LT_STAT_NO_CANDIDATE;
	switch (svc->policy) {
	case LT_POLICY_WEIGHTED:
		return lt_pick_spans_weighted(l, c, total, out);
	case LT_POLICY_ROUND_ROBIN: {
		__u32 slot = svc->slot;
		__u64 *cur = bpf_map_lookup_elem(&lt_rr, &slot);

		a = (cur ? __sync_fetch_and_add(cur, 1) : bpf_get_prandom_u32()) % total;
		b = a;
		break;
	}
	case LT_POLICY_CONSISTENT_HASH:
		return lt_affinity_spans(l, c, total, out);
	case LT_POLICY_LEAST_CONNECTIONS:
	case LT_POLICY_LEAST_REQUEST:
		a = bpf_get_prandom_u32() % total;
		b = total > 1 ? (a + 1 + bpf_get_prandom_u32() % (total - 1)) % total : a;
		break;
	default:
		a = bpf_get_prandom_u32() % total;
		b = a;
	}
	if (a < lt_len(l->pick[0]) && b < lt_len(l->pick[0])) { /* one span: no loop */
		l->at = l->pick[0].lo + a;
		l->at2 = l->pick[0].lo + b;
	} else {
		lt_at(l, c, a, b);
	}
	*out = l->at2 != l->at && lt_conns_of(l->at2) < lt_conns_of(l->at) ? l->at2 : l->at;
	return LT_OK;
}

/* lt_pick_loads draws a priority (step 6: choosePriority; no load anywhere:
 * P0 healthy) and picks in its healthy spans, its degraded spans, or in
 * panic all of them (Envoy's hostSourceToUse). */
static __always_inline int lt_pick_loads(const struct lt_service *svc, const __u64 *labels, struct lt_loads *l,
					 __u64 draw, __u32 *out)
{
	struct lt_walk_ctx c = {.svc = svc, .labels = labels, .l = l};
	__u32 p;

	l->draw = draw % 100 + 1;
	l->agg = 0;
	l->chosen = 0;
	l->chosen_deg = 0;
	if (l->draw > l->lh[0]) /* else P0 healthy, without a loop */
		bpf_loop(2 * l->n, lt_choose_cb, &c, 0);
	p = l->chosen;
	for (int i = 0; i < LT_PICK_SPANS; i++)
		l->pick[i] = (struct lt_span){0, 0};
	if (p >= LT_MAX_PRIO)
		return LT_STAT_BAD_INDEX;
	if (l->panic & (1U << p)) {
		lt_spans_of(l, 0, p, &l->pick[0]);
		lt_spans_of(l, 1, p, &l->pick[3]);
		lt_spans_of(l, 2, p, &l->pick[6]);
	} else {
		lt_spans_of(l, l->chosen_deg ? 1 : 0, p, &l->pick[0]);
	}
	return lt_pick_spans(l, out);
}

/* lt_select_in's answer for a service without a priority load (the value
 * was replaced between the caller's check and its copy). */
#define LT_NO_LOADS (-1)

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

/* lt_draw is the number that draws a priority: for consistent_hash the
 * client's (Envoy's choosePriority takes the request hash), else random. */
static __always_inline __u64 lt_draw(const struct lt_loads *l)
{
	if (l->svc.policy == LT_POLICY_CONSISTENT_HASH)
		return lt_mix64(l->aff_hash ^ LT_AFF_PRIO_SALT);
	return lt_rand64();
}

#include "distribute.h"

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
	return ret;
}

/* lt_select_in is lt_select for the source labels at labels. */
static __always_inline int lt_select_in(struct lt_loads *l, const __u64 *labels, struct lt_range *r, __u32 *out)
{
	if (labels != l->labels)
		__builtin_memcpy(l->labels, labels, sizeof(l->labels));
	return lt_select(l, r, out);
}

#endif /* LOCTREE_PRIORITY_H */
