/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * loctree kernel path: the map layout and the tree lookup shared by the
 * socket programs (loctree.c) and the test-only program (lookuptest.c).
 *
 * struct lt_node and struct lt_endpoint are byte-identical to the node and
 * endpoint records of docs/FORMAT.md: the loader copies records from the
 * encoded tree into the arrays unchanged. Indices inside the records are
 * the blob's absolute indices; a service's lt_service value carries the
 * deltas that turn them into map indices.
 */
#ifndef LOCTREE_H
#define LOCTREE_H

#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define LT_MAX_LEVELS 8   /* scopes per service (FORMAT.md: levels 1..8) */
#define LT_MAX_SEARCH 32  /* binary search steps: any u32 range */
#define LT_FAMILY_V4 4
#define LT_FAMILY_V6 6
#define LT_EP_HEALTHY 1

/* Default capacities; the loader overrides max_entries from its flags. */
#define LT_DEF_SERVICES 4096
#define LT_DEF_NODES 262144
#define LT_DEF_ENDPOINTS 262144
#define LT_DEF_CGROUPS 1024
#define LT_MAX_CGROUP_LEVEL 63 /* deepest cgroup level with its own locality */
#define LT_DEF_SOCKETS 65536

/* FNV-1a 64 of the empty string: the label of a missing scope value. */
#define LT_LABEL_EMPTY 0xcbf29ce484222325ULL
#define LT_NO_REGION 0xff

/* Policies (FORMAT.md service record, byte 22). */
enum lt_policy {
	LT_POLICY_RANDOM = 0,
	LT_POLICY_WEIGHTED = 1,
	LT_POLICY_ROUND_ROBIN = 2,
	LT_POLICY_LEAST_REQUEST = 3,
	LT_POLICY_LEAST_CONNECTIONS = 4,
	LT_POLICY_CONSISTENT_HASH = 5,
};

enum lt_mode {
	LT_MODE_FAILOVER = 0,
	LT_MODE_STRICT = 1,
};

/*
 * Counters in lt_stats (per CPU): redirects, and the reasons a connect or
 * datagram to a VIP was refused, named as Cilium names its drop reasons
 * (bpf/lib/common.h DROP_*). A lookup or pick returns LT_OK or one of the
 * refusal reasons.
 */
enum lt_stat {
	LT_STAT_REDIRECT = 0,     /* destination rewritten */
	LT_STAT_NO_CANDIDATE = 1, /* refused: no eligible endpoint (strict mode, or none eligible) */
	LT_STAT_BAD_INDEX = 2,    /* refused: a node or endpoint index outside the service's regions */
	LT_STAT_BAD_FAMILY = 3,   /* refused: the endpoint's address family is not the VIP's */
	LT_STAT_SOCKS_FULL = 4,   /* redirected, but lt_socks was full: no getpeername rewrite */
	LT_STAT_SCRATCH_BUSY = 5, /* refused: every priority-load scratch slot of this CPU was in use */
	LT_STAT_MAX = 6,
};

#define LT_OK LT_STAT_REDIRECT

/* Node record: FORMAT.md "Node record (24 bytes)". */
struct lt_node {
	__u64 label;
	__u32 lo;
	__u32 hi;
	__u32 first_child;
	__u32 child_count;
};

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

/* Endpoint record: FORMAT.md "Endpoint record (32 bytes)". */
struct lt_endpoint {
	__u32 addr[4]; /* network byte order; IPv4 in addr[0] */
	__u16 port;    /* network byte order */
	__u8 family;
	__u8 flags;
	__u32 weight;
	__u64 cum_weight;
};

/*
 * An address and port: the key of lt_frontends (a service VIP) and of
 * lt_conns (a backend). Its first 19 bytes are laid out as an endpoint
 * record's, so a backend is the prefix of its endpoint.
 */
struct lt_addr {
	__u32 addr[4]; /* network byte order; IPv4 in addr[0] */
	__u16 port;    /* network byte order */
	__u8 family;
	__u8 pad;
};

/*
 * Value of lt_frontends: one installed service. Readers copy it once and
 * walk only that copy; the loader publishes a changed service by replacing
 * the value, and reuses the old copy's regions only after an RCU grace
 * period (loader/grace.go). Every index a walk computes is checked against
 * the copy's own regions, so even a torn walk stays inside its service.
 */
struct lt_service {
	__u64 src[LT_MAX_LEVELS];        /* labels of this node's locality, per scope */
	__u64 scope_keys[LT_MAX_LEVELS]; /* labels of the scope keys (region, zone, ...) */
	__u64 digest;             /* loader: hash of the service's records */
	__u64 generation;         /* tree generation that installed it */
	__u32 root;               /* map index of the root node */
	__u32 node_delta;         /* map index = record node index + node_delta */
	__u32 ep_delta;           /* map index = record endpoint index + ep_delta */
	__u32 node_base;          /* node region [node_base, node_base+node_len) */
	__u32 node_len;
	__u32 ep_base;            /* endpoint region [ep_base, ep_base+ep_len) */
	__u32 ep_len;
	__u32 slot;               /* index into lt_rr */
	__u8 levels;
	__u8 mode;
	__u8 policy;
	__u8 health;
	__u32 affinity_timeout;   /* consistent_hash: seconds, 0 the default (affinity.h) */
	__u8 min_rank;            /* bounded failover: candidates share at least this many scopes */
	__u8 region_at;           /* index of the scope "region" (failover rules), LT_NO_REGION: none */
	__u16 of;                 /* overprovisioning factor, percent; 0: no priority load (priority.h) */
	/* Priority load (priority.h): the aux trees and the failover rules sit
	 * in this service's node region after its own tree, so they are
	 * published and reused with it. */
	__u32 aux_delta;          /* map index = aux record index + aux_delta */
	__u32 aux_root[2];        /* map indices of the degraded and the unhealthy tree's roots;
				   * with net_rule, aux_root[0] is the network tree's */
	__u32 rules;              /* map index of the first failover rule */
	__u8 rule_count;          /* failover rules, sorted by from-region label */
	__u8 panic;               /* panic threshold, percent; 0 disables panic */
	__u8 dist_count;          /* distribute rules (distribute.h); their blocks sit where the failover rules would */
	/* ztunnel's network rule (docs/FORMAT.md "Network rule"), never with a
	 * priority load: the network tree sits in this service's node region
	 * after its own tree, its root at aux_root[0] and its child indices
	 * rebased by the loader to node_delta, over copies of the eligible
	 * endpoints that follow the service's endpoints in its region. */
	__u8 net_rule;
	/* The child table (struct lt_kid): kid_slots home slots from map index
	 * kids, in this service's node region after every other record, then
	 * the slots of keys placed past the last home slot and a free slot.
	 * kid_slots 0: no table, as the service has no node with children. */
	__u32 kids;
	__u32 kid_slots;
};

/*
 * Value of lt_cgroup_src: the locality of the workloads in one cgroup when it
 * differs from the node's (a gateway, a pod placed elsewhere). keys[i] is the
 * label of a scope key, values[i] the label of its value.
 */
struct lt_locality {
	__u64 keys[LT_MAX_LEVELS];
	__u64 values[LT_MAX_LEVELS];
	__u32 count;
	__u32 level; /* the cgroup's depth below the cgroup v2 root */
};

/*
 * Per-socket state (lt_socks, by socket cookie): the VIP the socket
 * addressed and the backend it was sent to, for getpeername, for keeping an
 * unconnected UDP socket on one backend, and for least_connections counts.
 */
struct lt_sock {
	struct lt_addr vip;
	struct lt_addr backend;
	__u32 ep;     /* map index of backend when it was picked */
	__u8 counted; /* 1: lt_conns[backend] was incremented for this socket */
	__u8 pad[3];
};

/*
 * Key of lt_rev: a socket and a backend it sent datagrams to. recvmsg turns
 * a reply from any backend a socket used back into the VIP (Cilium's
 * cilium_lb4_reverse_sk, bpf/bpf_sock.c).
 */
struct lt_rev_key {
	__u64 cookie;
	struct lt_addr backend;
	__u32 pad;
};

/* A lookup result: map indices. */
struct lt_range {
	__u32 lo;
	__u32 hi;
	__u32 node;
	__u32 depth;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, LT_DEF_SERVICES);
	__type(key, struct lt_addr);
	__type(value, struct lt_service);
} lt_frontends SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, LT_DEF_NODES);
	__type(key, __u32);
	__type(value, struct lt_node);
} lt_nodes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, LT_DEF_ENDPOINTS);
	__type(key, __u32);
	__type(value, struct lt_endpoint);
} lt_endpoints SEC(".maps");

/* Source locality per cgroup id, overriding the node's. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LT_DEF_CGROUPS);
	__type(key, __u64);
	__type(value, struct lt_locality);
} lt_cgroup_src SEC(".maps");

/* Bit l set: some cgroup at level l has an entry in lt_cgroup_src. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} lt_cgroup_levels SEC(".maps");

/*
 * Open connections per backend (least_connections), keyed by address so a
 * count follows its endpoint when an update moves it. An LRU: entries of
 * backends that are gone age out; a live backend is looked up at every
 * pick of its service and stays.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, LT_DEF_ENDPOINTS);
	__type(key, struct lt_addr);
	__type(value, __u64);
} lt_conns SEC(".maps");

/* Round-robin cursor per service slot. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, LT_DEF_SERVICES);
	__type(key, __u32);
	__type(value, __u64);
} lt_rr SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LT_STAT_MAX);
	__type(key, enum lt_stat);
	__type(value, __u64);
} lt_stats SEC(".maps");

static __always_inline void lt_count(__u32 stat)
{
	__u64 *v = bpf_map_lookup_elem(&lt_stats, &stat);

	if (v)
		*v += 1;
}

/* lt_node_of is node idx if it lies in svc's node region, else NULL. */
static __always_inline struct lt_node *lt_node_of(const struct lt_service *svc, __u32 idx)
{
	if (idx - svc->node_base >= svc->node_len)
		return NULL;
	return bpf_map_lookup_elem(&lt_nodes, &idx);
}

/* Binary search steps over a node's children: a service has at most 2^24
 * endpoints (shared.MaxEndpoints), so a node at most 2^24 children. */
#define LT_CHILD_SEARCH 25

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

/* lt_child_search binary-searches the count children from map index base,
 * sorted by label: the kernel's child search before the child table, kept
 * for the benchmark that compares them (lt_lookup_by,
 * internal/bpftest/lookuptest.c). */
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

/* A walk's place: a node (map index) and its children (map index of the
 * first, and their number). */
struct lt_at {
	__u32 idx;
	__u32 first;
	__u32 count;
};

/* lt_at_node is the place of node idx of a tree whose records' indices
 * map at delta; 1 when idx leaves svc's node region. */
static __always_inline int lt_at_node(const struct lt_service *svc, __u32 idx, __u32 delta, struct lt_at *at)
{
	struct lt_node *n = lt_node_of(svc, idx);

	if (!n)
		return 1;
	*at = (struct lt_at){.idx = idx, .first = n->first_child + delta, .count = n->child_count};
	return 0;
}

/*
 * lt_step_by moves at one level down to its child labelled want: 1 when
 * it did, 0 when there is none (*bad set when an index left svc's node
 * region). With the child table the child's place comes from its slot, and
 * its record is not read; with bsearch (a compile-time constant only the
 * benchmark sets) the children's records are binary-searched.
 */
static __always_inline int lt_step_by(const struct lt_service *svc, struct lt_at *at, __u64 want, int *bad,
				      const int bsearch)
{
	if (bsearch) {
		__u32 idx = 0;
		struct lt_node *c = lt_child_search(svc, at->first, at->count, want, &idx, bad);

		if (!c)
			return 0;
		*at = (struct lt_at){.idx = idx, .first = c->first_child + svc->node_delta, .count = c->child_count};
		return 1;
	}
	if (at->count == 1) { /* an only child: its record, with no hash to compute */
		struct lt_node *c = lt_node_of(svc, at->first);

		if (!c) {
			*bad = 1;
			return 0;
		}
		if (c->label != want)
			return 0;
		*at = (struct lt_at){.idx = at->first, .first = c->first_child + svc->node_delta, .count = c->child_count};
		return 1;
	}
	struct lt_kid *k = lt_kid_in(svc, at->first, want, bad);

	if (!k)
		return 0;
	*at = (struct lt_at){.idx = svc->node_base + k->child, .first = svc->node_base + k->child_first,
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
	struct lt_at at;
	struct lt_node *n;
	int bad = 0;

	if (lt_at_node(svc, svc->root, svc->node_delta, &at))
		return LT_STAT_BAD_INDEX;
	r->depth = 0;
	for (int d = 0; d < LT_MAX_LEVELS; d++) {
		int found;

		if (d >= svc->levels || at.count == 0)
			break;
		found = lt_step_by(svc, &at, labels[d], &bad, bsearch);
		if (bad)
			return LT_STAT_BAD_INDEX;
		if (!found && d == 0 && svc->net_rule) { /* no endpoint on the source's network */
			if (lt_at_node(svc, svc->aux_root[0], svc->node_delta, &at))
				return LT_STAT_BAD_INDEX;
			continue;
		}
		if (!found)
			break;
		r->depth++;
	}
	n = lt_node_of(svc, at.idx);
	if (!n)
		return LT_STAT_BAD_INDEX;
	r->node = at.idx;
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

/*
 * lt_labels_for writes the source labels for svc's scopes from a cgroup's
 * own locality: the value of each scope key, or the empty value.
 */
static __always_inline void lt_labels_for(const struct lt_service *svc, const struct lt_locality *loc,
					  __u64 *buf)
{
	for (int d = 0; d < LT_MAX_LEVELS; d++) {
		buf[d] = LT_LABEL_EMPTY;
		for (int j = 0; j < LT_MAX_LEVELS; j++) {
			if (j < loc->count && loc->keys[j] == svc->scope_keys[d])
				buf[d] = loc->values[j];
		}
	}
}

struct lt_cgroup_search {
	__u64 mask;                    /* levels with entries */
	const struct lt_service *svc;  /* the service being looked up */
	__u64 *labels;                 /* out: svc's source labels, when found */
	__u64 found;                   /* 1: the task's cgroup or an ancestor has its own locality */
};

/* lt_cgroup_level checks one level, deepest first (a bpf_loop callback, so
 * the verifier checks it once instead of once per level and branch). The
 * locality is read once, where it is found. */
static long lt_cgroup_level(__u64 i, void *data)
{
	struct lt_cgroup_search *c = data;
	int level = LT_MAX_CGROUP_LEVEL - (int)i;
	struct lt_locality *loc;
	__u64 id;

	if (level < 0 || !(c->mask & (1ULL << level)))
		return 0;
	id = bpf_get_current_ancestor_cgroup_id(level);
	loc = id ? bpf_map_lookup_elem(&lt_cgroup_src, &id) : NULL;
	if (!loc)
		return 0;
	lt_labels_for(c->svc, loc, c->labels);
	c->found = 1;
	return 1;
}

/*
 * lt_source returns the source labels for svc: those of the calling task's
 * cgroup, or of its nearest ancestor, with its own locality in
 * lt_cgroup_src (written to buf), or else the node's, precomputed in
 * svc->src. Only levels that hold entries are looked up; with no entry at
 * all it costs one array read.
 */
static __always_inline const __u64 *lt_source(const struct lt_service *svc, __u64 *buf)
{
	__u32 zero = 0;
	__u64 *mask = bpf_map_lookup_elem(&lt_cgroup_levels, &zero);
	struct lt_cgroup_search c = {.mask = mask ? *mask : 0, .svc = svc, .labels = buf};

	if (c.mask)
		bpf_loop(LT_MAX_CGROUP_LEVEL + 1, lt_cgroup_level, &c, 0);
	return c.found ? buf : svc->src;
}

static __always_inline __u64 lt_rand64(void)
{
	return ((__u64)bpf_get_prandom_u32() << 32) | bpf_get_prandom_u32();
}

static __always_inline struct lt_endpoint *lt_ep_at(__u32 idx)
{
	return bpf_map_lookup_elem(&lt_endpoints, &idx);
}

/*
 * lt_pick_weighted picks an index in [lo, hi) with probability proportional
 * to its weight: a random point in the range's weight, then a binary search
 * over the prefix sums (cum_weight) for the first endpoint past it.
 */
static __always_inline int lt_pick_weighted(__u32 lo, __u32 hi, __u32 *out)
{
	struct lt_endpoint *first = lt_ep_at(lo), *last = lt_ep_at(hi - 1);
	__u64 base, total, target;
	__u32 a = lo, b = hi - 1;

	if (!first || !last)
		return LT_STAT_BAD_INDEX;
	base = first->cum_weight - first->weight;
	total = last->cum_weight - base;
	if (total == 0) {
		*out = lo + bpf_get_prandom_u32() % (hi - lo);
		return LT_OK;
	}
	target = base + lt_rand64() % total;
	/* smallest i in [a, b] with cum_weight[i] > target; b always qualifies */
	for (int s = 0; s < LT_MAX_SEARCH && a < b; s++) {
		__u32 mid = a + (b - a) / 2;
		struct lt_endpoint *e = lt_ep_at(mid);

		if (!e)
			return LT_STAT_BAD_INDEX;
		if (e->cum_weight > target)
			b = mid;
		else
			a = mid + 1;
	}
	*out = a;
	return LT_OK;
}

/* lt_backend_of is an endpoint's address and port, the key of lt_conns. */
static __always_inline void lt_backend_of(const struct lt_endpoint *ep, struct lt_addr *b)
{
	__builtin_memcpy(b->addr, ep->addr, sizeof(b->addr));
	b->port = ep->port;
	b->family = ep->family;
	b->pad = 0;
}

/* lt_conns_of is the number of open connections to endpoint idx. */
static __always_inline __u64 lt_conns_of(__u32 idx)
{
	struct lt_endpoint *ep = lt_ep_at(idx);
	struct lt_addr b;
	__u64 *v;

	if (!ep)
		return 0;
	lt_backend_of(ep, &b);
	v = bpf_map_lookup_elem(&lt_conns, &b);
	return v ? *v : 0;
}

/* lt_counts reports whether a policy counts open connections per backend. */
static __always_inline int lt_counts(__u8 policy)
{
	return policy == LT_POLICY_LEAST_CONNECTIONS || policy == LT_POLICY_LEAST_REQUEST;
}

/*
 * lt_pick chooses one endpoint (map index) in r by svc's policy.
 * least_connections and least_request are the power of two random choices
 * over the open connection counts (a connection is the request a socket
 * load balancer sees), two distinct candidates as shared's picker draws
 * them. consistent_hash needs the client, so a socket program picks it with
 * lt_pick_for (affinity.h); here it is random.
 */
static __always_inline int lt_pick(const struct lt_service *svc, const struct lt_range *r,
				   __u32 *out)
{
	__u32 n = r->hi - r->lo;

	switch (svc->policy) {
	case LT_POLICY_WEIGHTED:
		return lt_pick_weighted(r->lo, r->hi, out);
	case LT_POLICY_ROUND_ROBIN: {
		__u32 slot = svc->slot;
		__u64 *cur = bpf_map_lookup_elem(&lt_rr, &slot);
		__u64 k = cur ? __sync_fetch_and_add(cur, 1) : bpf_get_prandom_u32();

		*out = r->lo + (__u32)(k % n);
		return LT_OK;
	}
	case LT_POLICY_LEAST_CONNECTIONS:
	case LT_POLICY_LEAST_REQUEST: {
		__u32 a = bpf_get_prandom_u32() % n, b = a;

		if (n > 1)
			b = (a + 1 + bpf_get_prandom_u32() % (n - 1)) % n;
		*out = lt_conns_of(r->lo + b) < lt_conns_of(r->lo + a) ? r->lo + b : r->lo + a;
		return LT_OK;
	}
	default:
		*out = r->lo + bpf_get_prandom_u32() % n;
		return LT_OK;
	}
}

#endif /* LOCTREE_H */
