//go:build ignore
// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Test-only program: runs the kernel's tree lookup and pick (loctree.h)
 * for any source labels through BPF_PROG_TEST_RUN, so tests can compare the
 * kernel's answer with the Go lookup without sockets. Never attached.
 */
#include "loctree.h"

/* Input and output of lt_test_lookup (the program's context in, lt_test_out out). */
struct lt_test_args {
	struct lt_frontend fe; /* in: the service's VIP */
	__u32 status;          /* out: 0 found, 1 no candidate, 2 maps inconsistent, 3 no service */
	__u64 labels[LT_MAX_LEVELS]; /* in: source labels, one per scope */
	struct lt_range r;     /* out: map indices */
	__u32 pick;            /* out: picked endpoint (map index) */
	__u32 pad;
};

/* The kernel does not copy a syscall program's context back, so the
 * result goes to this one-entry array. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lt_test_args);
} lt_test_out SEC(".maps");

SEC("syscall")
int lt_test_lookup(struct lt_test_args *args)
{
	struct lt_frontend fe = args->fe;
	struct lt_service *svc;
	__u64 labels[LT_MAX_LEVELS];
	struct lt_range r = {};
	struct lt_test_args *out;
	__u32 pick = 0, zero = 0;
	int ret;

#pragma unroll
	for (int i = 0; i < LT_MAX_LEVELS; i++)
		labels[i] = args->labels[i];
	out = bpf_map_lookup_elem(&lt_test_out, &zero);
	if (!out)
		return 1;
	out->fe = fe;
	svc = bpf_map_lookup_elem(&lt_frontends, &fe);
	if (!svc) {
		out->status = 3;
		return 0;
	}
	ret = lt_lookup(svc, labels, &r);
	if (ret == 0 && lt_pick(svc, &r, &pick) < 0)
		ret = -2;
	out->status = ret == 0 ? 0 : (ret == -1 ? 1 : 2);
	out->r = r;
	out->pick = pick;
	return 0;
}

char __license[] SEC("license") = "Dual BSD/GPL";
