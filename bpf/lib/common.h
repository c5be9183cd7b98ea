/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * What every header uses: the kernel's types and helpers, loctree's limits
 * and default capacities, the service policies and modes, and the named
 * reasons a lookup or pick returns.
 */
#ifndef LOCTREE_LIB_COMMON_H
#define LOCTREE_LIB_COMMON_H

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

/* lt_bounded makes the compiler use the register a bounds check just
 * checked (the verifier tracks bounds per register). */
#define lt_bounded(x) asm volatile("" : "+r"(x))

#endif /* LOCTREE_LIB_COMMON_H */
