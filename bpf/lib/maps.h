/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The records and the maps that hold an installed tree.
 *
 * struct lt_node and struct lt_endpoint are byte-identical to the node and
 * endpoint records of docs/FORMAT.md: the loader copies records from the
 * encoded tree into the arrays unchanged. Indices inside the records are
 * the blob's absolute indices; a service's lt_service value carries the
 * deltas that turn them into map indices.
 */
#ifndef LOCTREE_LIB_MAPS_H
#define LOCTREE_LIB_MAPS_H

#include "common.h"

/* Node record: FORMAT.md "Node record (24 bytes)". */
struct lt_node {
	__u64 label;
	__u32 lo;
	__u32 hi;
	__u32 first_child;
	__u32 child_count;
};

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
	/* 2: the network rule of a spillover service (docs/FORMAT.md "Network
	 * rule", Istio's failoverPriority network rule): the other-network
	 * tree (lt_service.other_root) follows the unhealthy tree, its records
	 * mapped by aux_delta, over copies that follow the service's
	 * endpoints (priority.h walks it as three more trees). Also 2 for the
	 * copies by a first scope other than network (format 7, "Copies by the
	 * first scope"), whose walk stops at other_depth. */
	/* The child table (struct lt_kid): kid_slots home slots from map index
	 * kids, in this service's node region after every other record, then
	 * the slots of keys placed past the last home slot and a free slot.
	 * kid_slots 0: no table, as the service has no node with children. */
	__u32 kids;
	__u32 kid_slots;
	/* The locality-weighted choice inside a priority (locality.h): with a
	 * priority load, loc_n[0] records of the eligible set's localities
	 * then loc_n[1] of the degraded set's (then loc_n[2] and loc_n[3] of
	 * the other-network trees'), from map index loc (after the
	 * failover rules), each a node record whose lo and hi are the
	 * locality's endpoints and whose label is the running sum of the
	 * set's effective locality weights up to it; with distribute rules,
	 * instead, one block per rule block (distribute.h), after them, located
	 * by the rule's block (loc_n 0). loc_depth 0: no draw. */
	__u32 loc;
	__u32 loc_n[4];           /* eligible, degraded, then (net_rule 2) the other-network trees' */
	__u8 loc_depth;
	/* net_rule 2: the depth at which the walk of each set's other-value
	 * tree stops (priority.h lt_step): 1 when the other values of the
	 * first scope are one priority, the locality depth when they are
	 * ranked by region, zone and subzone only, LT_MAX_LEVELS + 1 (never)
	 * under the network rule. */
	__u8 other_depth;
	/* net_rule 2: the groups of copies of the other-value tree
	 * (docs/FORMAT.md "Classes before the locality", shared/groups.go),
	 * one per class before the locality in priority order (priority.h
	 * lt_group): first is the index of the first locality scope with
	 * classes, else 1 (one group): the levels a class's key takes (its
	 * chain). class_depth: where a class's walk stops under the network
	 * rule (1 without failover rules, the locality depth with them). */
	__u8 first;
	__u8 class_depth;
	__u32 other_root;         /* net_rule 2: map index of the other-network tree's root */
	/* Load-aware widening (widen.h): the band in connections per eligible
	 * endpoint (load_high 0: the service does not widen), and where the
	 * nodes' keys and the endpoints' leaves sit in the node region. */
	__u32 widen;              /* map index of the widening record of the root (struct lt_widen_node) */
	__u32 widen_leaves;       /* map index of the first leaf entry (struct lt_widen_leaves) */
	__u16 load_high;
	__u16 load_low;
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

static __always_inline struct lt_endpoint *lt_ep_at(__u32 idx)
{
	return bpf_map_lookup_elem(&lt_endpoints, &idx);
}

#endif /* LOCTREE_LIB_MAPS_H */
