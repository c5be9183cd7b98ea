/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The state of one priority load computation (struct lt_loads) and where
 * it lives: its limits, the per-CPU scratch slots it is computed in, the
 * per-priority pick counters, and the helpers every step shares (the
 * bpf_loop context, spans, the draw).
 *
 * The state (struct lt_loads) does not fit the BPF stack beside
 * lt_redirect's, so it lives in a per-CPU map value: the service's entry
 * of lt_loads_cache, which keeps the loads for the next connect, or else
 * a scratch slot. A cgroup socket hook may be preempted (CONFIG_PREEMPT_RCU)
 * by another task's connect on the same CPU, so a value is taken with a
 * compare-and-swap and given back at the end; with the entry and every
 * scratch slot of the CPU taken the connect is refused
 * (LT_STAT_SCRATCH_BUSY), never computed on a shared value.
 */
#ifndef LOCTREE_LIB_LOADS_H
#define LOCTREE_LIB_LOADS_H

#include "common.h"
#include "maps.h"
#include "pick.h"
#include "affinity.h"

/* Mixed into a consistent_hash client's hash to draw its priority (and a
 * distribute target): the draw and the jump hash inside the priority must
 * not be the same number. */
#define LT_AFF_PRIO_SALT 0x6a09e667f3bcc909ULL

#define LT_SETS 3                       /* eligible, degraded, unhealthy */
#define LT_MAX_GROUPS 3                 /* groups of copies of the other-value tree (shared/groups.go maxGroups) */
#define LT_TREES (LT_SETS * (1 + LT_MAX_GROUPS)) /* the sets' trees, then each group's (net_rule 2) */
#define LT_DEPTHS (LT_MAX_LEVELS + 2)   /* a range per depth 0..levels, and an empty one below */
#define LT_RANKS (LT_MAX_LEVELS + 2)    /* one per rank, and one more where a failover rule splits */
#define LT_MAX_PRIO 32                  /* shared.MaxPriorities: the panic mask's bits */
/* The label of otherNetwork (shared/network.go): Label("\x00"), the
 * other-network tree's copies for a network no endpoint is on. */
#define LT_OTHER_NETWORK 0xaf63bd4c8601b7dfULL
#define LT_SPANS 3                      /* spans of one set in one priority */
#define LT_DIST_TARGETS 8 /* targets of a distribute rule (shared.MaxDistributeTargets) */
#define LT_PICK_SPANS (LT_SETS * LT_DIST_TARGETS) /* >= LT_SETS * LT_SPANS */
#define LT_SCRATCH_SLOTS 4

enum lt_failover_kind {
	LT_FO_NONE = 0, /* a priority no failover rule touches */
	LT_FO_TO = 1,   /* the rule's to-region */
	LT_FO_REST = 2, /* the other regions of the split rank */
};

struct lt_span {
	__u32 lo;
	__u32 hi;
};

/*
 * The priority loads of one source, map indices and percentages: what
 * lt_loads_compute writes and the pick and its caller read, so what an
 * lt_loads_cache entry keeps for the next connect.
 */
struct lt_prio_state {
	__u32 n; /* priorities */
	__u32 panic; /* bit p: priority p is in panic */
	struct lt_span path[LT_TREES][LT_DEPTHS];
	__u32 node[LT_TREES][LT_DEPTHS]; /* the node at each depth (the deepest reached below) */
	__u32 reach[LT_TREES];           /* depth each walk reached */
	struct lt_span to[LT_TREES];     /* the failover rule's to-region in each tree */
	__u32 healthy[LT_MAX_PRIO];
	__u32 degraded[LT_MAX_PRIO];
	__u32 total[LT_MAX_PRIO];
	__u8 rank[LT_MAX_PRIO];
	__u8 kind[LT_MAX_PRIO];  /* enum lt_failover_kind */
	__u8 other[LT_MAX_PRIO]; /* 0: of the sets' own trees, g + 1: of group g's (the other-value tree) */
	__u8 lh[LT_MAX_PRIO];    /* healthy load, percent */
	__u8 ld[LT_MAX_PRIO];    /* degraded load, percent */
} __attribute__((aligned(8)));

/*
 * What locality.h's lt_loc_pick found for pick spans span of the n
 * locality records at map index base: the runs of localities [lo, hi)
 * that make up each span, their effective weight w and the running
 * weight before each run. A function of those inputs and of the service
 * value (its records), so kept until lt_loads_bind copies in another
 * value (valid 0); the next connect with the same spans only draws.
 */
struct lt_loc_memo {
	__u32 valid;
	__u32 base, n;
	struct lt_span span[LT_SPANS];
	__u32 lo[LT_SPANS], hi[LT_SPANS];
	__u64 w[LT_SPANS];
	__u64 before[LT_SPANS];
};

/* The state of one priority load computation. */
struct lt_loads {
	__u32 busy; /* 1 while a program computes in this slot */
	__u32 valid; /* st holds the loads of svc for labels (select.h) */
	struct lt_prio_state st; /* the loads */
	struct lt_span pick[LT_PICK_SPANS]; /* the chosen priority's spans */
	__u32 stop[LT_TREES];    /* the walk of a tree has ended */
	__u64 key[LT_MAX_GROUPS]; /* each group's key for the source (priority.h lt_key_in) */
	__u8 gchain[LT_MAX_GROUPS]; /* each group's chain, stop and kind (priority.h lt_group), */
	__u8 gstop[LT_MAX_GROUPS];  /* read by the walk's callbacks without its branches */
	__u8 granked[LT_MAX_GROUPS];
	__u8 gpad[7];
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
	__u32 k, k2, at, at2;    /* lt_pick_nth: positions k, k2 are endpoints at, at2 */
	__u8 at_found, at2_found;
	__u64 wsum, wx;          /* weighted pick over spans */
	__u32 wfind, wspan;
	__u32 rule;              /* distribute: k+1 when rule k applies, 0 when none does */
	__s32 target;            /* distribute: the drawn target, -1 for every target's endpoints */
	__u32 dist_at;           /* distribute: map index of the applying rule's block */
	__u32 dist_found;
	__u32 dist_set;          /* distribute: the set drawn from, LT_SETS for all */
	__u32 loc_base;          /* locality.h: map index of the drawn set's first locality */
	struct lt_loc_memo loc;  /* locality.h: the runs of localities last found */
	struct lt_aff_key aff;   /* consistent_hash: the client and the service (affinity.h) */
	__u64 aff_hash;          /* consistent_hash: lt_aff_hash(&aff) */
	struct lt_service svc;   /* the one copy of the published value this computation reads */
	__u64 labels[LT_MAX_LEVELS]; /* the source labels st is (to be) computed for */
	__u64 own[LT_MAX_LEVELS]; /* a cgroup's own source labels (source.h), before they are compared */
};

/*
 * The priority loads last computed on this CPU for a service (lib/select.h
 * lt_loads_bind), in entry slot % LT_LOADS_CACHE of the service's lt_rr
 * slot: an array, direct-mapped, so a connect finds its entry without a
 * hash. The loads are a function of the published service value (its
 * records never change while it is published: the loader replaces the
 * value and reuses the old regions only after a grace period) and of the
 * source labels, so an entry holds both and serves a connect only when
 * both equal its own, byte for byte; two services of one entry take turns
 * (each computes where the other's loads were). The entry is the
 * connect's whole state, taken as a scratch slot is (busy): a hit reads
 * the loads where they are, with no copy, and a miss computes them there.
 * A preempting connect on the same CPU finds it taken and computes in a
 * scratch slot: one of the LT_SCRATCH_SLOTS entries after the
 * LT_LOADS_CACHE of the services. One map for both, so that the verifier
 * sees one kind of pointer whichever a connect takes, and checks the code
 * that follows once, not once per map.
 */
#define LT_LOADS_CACHE 128 /* entries per CPU for the services (a power of two) */

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LT_LOADS_CACHE + LT_SCRATCH_SLOTS);
	__type(key, __u32);
	__type(value, struct lt_loads);
} lt_loads_cache SEC(".maps");

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
	__u32 k = LT_LOADS_CACHE + i;
	struct lt_loads *l = bpf_map_lookup_elem(&lt_loads_cache, &k);

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

/* lt_len is the length of span s. A macro, not a function taking the
 * span by value: clang (14) copies a by-value span out of a loop over an
 * array of them a byte at a time (eight byte loads where two 4-byte
 * loads do). s is evaluated twice: callers pass an lvalue. */
#define lt_len(s) ((s).hi - (s).lo)

/* lt_draw is the number that draws a priority: for consistent_hash the
 * client's (Envoy's choosePriority takes the request hash), else random. */
static __always_inline __u64 lt_draw(const struct lt_loads *l)
{
	if (l->svc.policy == LT_POLICY_CONSISTENT_HASH)
		return lt_mix64(l->aff_hash ^ LT_AFF_PRIO_SALT);
	return lt_rand64();
}

#endif /* LOCTREE_LIB_LOADS_H */
