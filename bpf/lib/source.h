/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The source labels of a lookup: the calling task's cgroup's own locality
 * (lt_cgroup_src), or its nearest ancestor's, or else the node's.
 */
#ifndef LOCTREE_LIB_SOURCE_H
#define LOCTREE_LIB_SOURCE_H

#include "common.h"
#include "maps.h"

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
	__u64 found;                   /* the id of the task's cgroup or ancestor with its own locality; 0: none */
};

/*
 * The cgroup whose locality this CPU's last lookup used (0: the node's),
 * for the traffic counts of the pick that follows (traffic.h): written
 * only while some cgroup has its own locality, so a node without any
 * pays nothing.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} lt_src_cgroup SEC(".maps");

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
	c->found = id;
	return 1;
}

/*
 * lt_source returns the source labels for svc: those of the calling task's
 * cgroup, or of its nearest ancestor, with its own locality in
 * lt_cgroup_src (written to buf), or else the node's, precomputed in
 * svc->src. Only levels that hold entries are looked up; with no entry at
 * all it costs one array read. The cgroup found is noted in lt_src_cgroup.
 */
static __always_inline const __u64 *lt_source(const struct lt_service *svc, __u64 *buf)
{
	__u32 zero = 0;
	__u64 *mask = bpf_map_lookup_elem(&lt_cgroup_levels, &zero);
	struct lt_cgroup_search c = {.mask = mask ? *mask : 0, .svc = svc, .labels = buf};
	__u64 *last;

	if (c.mask) {
		bpf_loop(LT_MAX_CGROUP_LEVEL + 1, lt_cgroup_level, &c, 0);
		last = bpf_map_lookup_elem(&lt_src_cgroup, &zero);
		if (last)
			*last = c.found;
	}
	return c.found ? buf : svc->src;
}

/* lt_source_labels writes svc's source labels (lt_source) to buf. */
static __always_inline void lt_source_labels(const struct lt_service *svc, __u64 *buf)
{
	const __u64 *src = lt_source(svc, buf);

	if (src != buf)
		__builtin_memcpy(buf, src, LT_MAX_LEVELS * sizeof(__u64));
}

#endif /* LOCTREE_LIB_SOURCE_H */
