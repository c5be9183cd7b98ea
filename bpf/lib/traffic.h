/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Traffic counts: new redirects by (source, service, backend), from which
 * the agent draws the zone × zone matrix (docs/AGENT.md, "Cross-zone
 * traffic"). The kernel does not know localities by name: the source is
 * the cgroup whose own locality the connect used (0: the node's), the
 * destination the backend's address; the agent turns them into the
 * source's and the endpoint's values at the scope it reports. One per-CPU
 * add per new pick; a socket that keeps its backend is not counted again.
 * A redirected TCP connection's bytes are added to its pick's key once,
 * when it closes (lt_sockops in loctree.c): no work per packet, and the
 * bytes of a connection still open are not in the counts yet.
 */
#ifndef LOCTREE_LIB_TRAFFIC_H
#define LOCTREE_LIB_TRAFFIC_H

#include "common.h"
#include "maps.h"
#include "source.h"

#define LT_DEF_TRAFFIC 16384

/* Key of lt_traffic. */
struct lt_traffic_key {
	__u64 src;              /* cgroup id with its own locality (lt_cgroup_src), 0: the node */
	struct lt_addr fe;      /* the service's VIP */
	struct lt_addr backend; /* the picked endpoint */
};

/* Value of lt_traffic and lt_traffic_other, per CPU. */
struct lt_traffic_val {
	__u64 picks;    /* new picks */
	__u64 sent;     /* bytes the backends acknowledged (bytes_acked) of closed TCP connections */
	__u64 received; /* bytes received from the backends (bytes_received) of closed TCP connections */
};

/*
 * Counts per key, per CPU. Not an LRU: an evicted entry would make a
 * counter go back. When it is full, new keys count in lt_traffic_other,
 * which the agent reports as (other).
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, LT_DEF_TRAFFIC);
	__type(key, struct lt_traffic_key);
	__type(value, struct lt_traffic_val);
} lt_traffic SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lt_traffic_val);
} lt_traffic_other SEC(".maps");

/* lt_traffic_source is the cgroup whose locality the connect's lookup
 * used (lt_source notes it in lt_src_cgroup), or 0 for the node's: one
 * array read, two while some cgroup has its own locality. A connect that
 * preempts this one on its CPU between the lookup and the count may
 * overwrite the note: the count then goes to that connect's source. */
static __always_inline __u64 lt_traffic_source(void)
{
	__u32 zero = 0;
	__u64 *mask = bpf_map_lookup_elem(&lt_cgroup_levels, &zero), *last;

	if (!mask || !*mask)
		return 0;
	last = bpf_map_lookup_elem(&lt_src_cgroup, &zero);
	return last ? *last : 0;
}

/* Zeroes a new key's value is copied from: one the connect's stack has no
 * room for (lt_redirect uses all but the last few bytes). Never written. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lt_traffic_val);
} lt_traffic_zero SEC(".maps");

/* lt_traffic_add adds picks and bytes to the counts of (src, fe, b). */
static __always_inline void lt_traffic_add(__u64 src, const struct lt_addr *fe, const struct lt_addr *b, __u64 picks,
					   __u64 sent, __u64 received)
{
	struct lt_traffic_key k = {.src = src, .fe = *fe, .backend = *b};
	struct lt_traffic_val *v = bpf_map_lookup_elem(&lt_traffic, &k);
	__u32 zero = 0;

	if (!v) {
		struct lt_traffic_val *z = bpf_map_lookup_elem(&lt_traffic_zero, &zero);

		if (z) /* fails when the map is full, or another CPU added it meanwhile */
			bpf_map_update_elem(&lt_traffic, &k, z, BPF_NOEXIST);
		v = bpf_map_lookup_elem(&lt_traffic, &k);
	}
	if (!v)
		v = bpf_map_lookup_elem(&lt_traffic_other, &zero);
	if (!v)
		return;
	v->picks += picks;
	v->sent += sent;
	v->received += received;
}

#endif /* LOCTREE_LIB_TRAFFIC_H */
