//go:build ignore
// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Test-only programs, loaded only by tests (never by the agent): they run
 * the kernel's tree lookup and pick (bpf/lib) through
 * BPF_PROG_TEST_RUN, so tests can compare the kernel's answer with the Go
 * lookup without sockets, hammer a service with lookups while the loader
 * updates it, and hold one service value across many walks while the
 * loader reuses regions. Never attached.
 */
#include "lib/common.h"
#include "lib/maps.h"
#include "lib/source.h"
#include "lib/lookup.h"
#include "lib/pick.h"
#include "lib/affinity.h"
#include "lib/loads.h"
#include "lib/priority.h"
#include "lib/select.h"

/* Input and output of lt_test_lookup (the program's context in, lt_test_out out). */
struct lt_test_args {
	struct lt_addr fe; /* in: the service's VIP */
	__u32 use_cgroup;      /* in: 1: source from lt_cgroup_src[cgroup] instead of labels */
	__u64 cgroup;          /* in: a cgroup id, with use_cgroup */
	__u32 status;          /* out: an enum lt_stat (LT_OK: found), or LT_TEST_NO_SERVICE */
	__u64 labels[LT_MAX_LEVELS]; /* in: source labels, one per scope */
	struct lt_range r;     /* out: map indices */
	__u32 pick;            /* out: picked endpoint (map index) */
	__u32 loops;           /* in: lt_test_hammer's lookups per run */
};

/* Output of lt_test_hammer, accumulated over runs. */
struct lt_test_hammer_out {
	__u64 runs;    /* lookups done */
	__u64 torn;    /* picked endpoint's weight != the service value's generation */
	__u64 missing; /* no candidate, inconsistent maps or no service */
};

#define LT_TEST_NO_SERVICE 100

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
	struct lt_addr fe = args->fe;
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
		out->status = LT_TEST_NO_SERVICE;
		return 0;
	}
	if (args->use_cgroup) {
		__u64 cg = args->cgroup;
		struct lt_locality *loc = bpf_map_lookup_elem(&lt_cgroup_src, &cg);

		if (loc)
			lt_labels_for(svc, loc, labels);
	}
	ret = lt_lookup(svc, labels, &r);
	if (ret == LT_OK)
		ret = lt_pick(svc, &r, &pick);
	out->status = ret;
	out->r = r;
	out->pick = pick;
	return 0;
}

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lt_test_hammer_out);
} lt_test_hammer_res SEC(".maps");

struct lt_hammer_ctx {
	struct lt_addr fe;
	__u64 labels[LT_MAX_LEVELS];
	struct lt_test_hammer_out *out;
};

/* lt_hammer_one is one lookup and pick; the topologies the test installs
 * give every endpoint of generation g the weight g, so a pick that mixes a
 * service value with records of another generation is seen as torn. */
static long lt_hammer_one(__u64 i, void *data)
{
	struct lt_hammer_ctx *c = data;
	struct lt_service *found = bpf_map_lookup_elem(&lt_frontends, &c->fe), svc;
	struct lt_endpoint *ep;
	struct lt_range r = {};
	__u32 pick = 0;

	c->out->runs++;
	if (!found) {
		c->out->missing++;
		return 0;
	}
	__builtin_memcpy(&svc, found, sizeof(svc)); /* as lt_redirect does */
	if (lt_lookup(&svc, c->labels, &r) != LT_OK || lt_pick(&svc, &r, &pick) != LT_OK) {
		c->out->missing++;
		return 0;
	}
	ep = lt_ep_at(pick);
	if (!ep || ep->weight != (__u32)svc.generation)
		c->out->torn++;
	return 0;
}

SEC("syscall")
int lt_test_hammer(struct lt_test_args *args)
{
	struct lt_hammer_ctx c = {.fe = args->fe};
	__u32 zero = 0;

#pragma unroll
	for (int i = 0; i < LT_MAX_LEVELS; i++)
		c.labels[i] = args->labels[i];
	c.out = bpf_map_lookup_elem(&lt_test_hammer_res, &zero);
	if (!c.out)
		return 1;
	bpf_loop(args->loops, lt_hammer_one, &c, 0);
	return 0;
}

/*
 * lt_test_stale: one service value held across many walks. The program
 * copies the service's published value once and then walks and picks with
 * that copy lt_test_stale_in.loops times, all inside one RCU read-side
 * section (BPF_PROG_TEST_RUN runs a tc program under rcu_read_lock), as a
 * connect preempted mid-walk would. Every endpoint of the service the test
 * installs has the port lt_test_stale_in.port; a pick with another port
 * landed in a region the loader had already given to another service.
 */
struct lt_test_stale_in {
	struct lt_addr fe;
	__u16 port;  /* network byte order, as in endpoint records */
	__u16 pad;
	__u32 loops;
	__u64 labels[LT_MAX_LEVELS];
};

struct lt_test_stale_out {
	__u64 runs;    /* walks done */
	__u64 foreign; /* picks of another service's endpoint */
	__u64 refused; /* walks that refused (allowed: a stale walk may refuse) */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lt_test_stale_in);
} lt_test_stale_args SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lt_test_stale_out);
} lt_test_stale_res SEC(".maps");

struct lt_stale_ctx {
	struct lt_service svc;
	struct lt_test_stale_in *in;
	struct lt_test_stale_out *out;
};

static long lt_stale_one(__u64 i, void *data)
{
	struct lt_stale_ctx *c = data;
	struct lt_endpoint *ep;
	struct lt_range r = {};
	__u32 pick = 0;

	c->out->runs++;
	if (lt_lookup(&c->svc, c->in->labels, &r) != LT_OK || lt_pick(&c->svc, &r, &pick) != LT_OK) {
		c->out->refused++;
		return 0;
	}
	ep = lt_ep_at(pick);
	if (!ep || ep->port != c->in->port)
		c->out->foreign++;
	return 0;
}

SEC("tc")
int lt_test_stale(struct __sk_buff *skb)
{
	struct lt_stale_ctx c = {};
	struct lt_service *found;
	__u32 zero = 0;

	c.in = bpf_map_lookup_elem(&lt_test_stale_args, &zero);
	c.out = bpf_map_lookup_elem(&lt_test_stale_res, &zero);
	if (!c.in || !c.out)
		return 0;
	found = bpf_map_lookup_elem(&lt_frontends, &c.in->fe);
	if (!found)
		return 0;
	__builtin_memcpy(&c.svc, found, sizeof(c.svc));
	bpf_loop(c.in->loops, lt_stale_one, &c, 0);
	return 0;
}

/*
 * lt_test_jump: the first pick of consistent_hash (affinity.h) for a client
 * and a service over n candidates: the key's hash and its jump bucket.
 */
struct lt_test_jump_args {
	__u64 client; /* in: a netns cookie */
	struct lt_addr fe; /* in: the service's VIP */
	__u32 n;      /* in: candidates */
	__u64 hash;   /* out: lt_aff_hash */
	__u32 bucket; /* out: lt_jump(hash, n) */
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lt_test_jump_args);
} lt_test_jump_out SEC(".maps");

SEC("syscall")
int lt_test_jump(struct lt_test_jump_args *args)
{
	struct lt_aff_key k = {.client = args->client, .fe = args->fe};
	__u32 zero = 0;
	struct lt_test_jump_args *out = bpf_map_lookup_elem(&lt_test_jump_out, &zero);

	if (!out)
		return 1;
	out->hash = lt_aff_hash(&k);
	out->bucket = args->n ? lt_jump(out->hash, args->n) : 0;
	return 0;
}

/*
 * lt_test_loads: the kernel's priority load (priority.h) for one service and
 * source, as lt_redirect_loads computes it, with every priority's spans,
 * for the differential test against shared.Service.Loads.
 */
struct lt_test_loads_out {
	struct lt_addr fe;
	__u32 status; /* lt_select_in's enum lt_stat, or LT_TEST_NO_SERVICE */
	__u32 n;
	__u32 panic;
	__u32 ep_delta; /* map index = endpoint record index + ep_delta */
	__u32 pick;
	__u32 healthy[LT_MAX_PRIO];
	__u32 degraded[LT_MAX_PRIO];
	__u32 total[LT_MAX_PRIO];
	__u8 rank[LT_MAX_PRIO];
	__u8 kind[LT_MAX_PRIO];
	__u8 lh[LT_MAX_PRIO];
	__u8 ld[LT_MAX_PRIO];
	__u8 other[LT_MAX_PRIO];
	struct lt_span spans[LT_MAX_PRIO][LT_SETS][LT_SPANS];
	__u32 rule;   /* distribute: the rule that applied (lt_loads.rule) */
	__s32 target; /* distribute: the drawn target, -1: every target */
	__u32 deg;    /* the pick drew the degraded load */
	struct lt_span pick_spans[LT_PICK_SPANS]; /* the spans the pick drew from */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lt_test_loads_out);
} lt_test_loads_res SEC(".maps");

struct lt_test_copy_ctx {
	struct lt_loads *l;
	struct lt_test_loads_out *out;
};

static long lt_test_copy_prio(__u64 i, void *data)
{
	struct lt_test_copy_ctx *c = data;
	__u32 p = i;

	if (p >= LT_MAX_PRIO)
		return 1;
	lt_bounded(p);
	c->out->healthy[p] = c->l->st.healthy[p];
	c->out->degraded[p] = c->l->st.degraded[p];
	c->out->total[p] = c->l->st.total[p];
	c->out->rank[p] = c->l->st.rank[p];
	c->out->kind[p] = c->l->st.kind[p];
	c->out->lh[p] = c->l->st.lh[p];
	c->out->ld[p] = c->l->st.ld[p];
	c->out->other[p] = c->l->st.other[p];
	if (p >= c->l->st.n) {
		for (int set = 0; set < LT_SETS; set++)
			for (int k = 0; k < LT_SPANS; k++)
				c->out->spans[p][set][k] = (struct lt_span){0, 0};
		return 0;
	}
	lt_spans_of(c->l, 0, p, c->out->spans[p][0]);
	lt_spans_of(c->l, 1, p, c->out->spans[p][1]);
	lt_spans_of(c->l, 2, p, c->out->spans[p][2]);
	return 0;
}

SEC("syscall")
int lt_test_loads(struct lt_test_args *args)
{
	struct lt_addr fe = args->fe;
	struct lt_test_copy_ctx c = {};
	struct lt_service *found;
	struct lt_range r = {};
	__u64 labels[LT_MAX_LEVELS];
	__u32 zero = 0, pick = 0;

#pragma unroll
	for (int i = 0; i < LT_MAX_LEVELS; i++)
		labels[i] = args->labels[i];
	c.out = bpf_map_lookup_elem(&lt_test_loads_res, &zero);
	if (!c.out)
		return 1;
	__builtin_memset(c.out, 0, __builtin_offsetof(struct lt_test_loads_out, spans)); /* one memset is too long; lt_test_copy_prio zeroes the spans */
	asm volatile("" ::: "memory"); /* clang would merge the stores below into it */
	c.out->rule = 0;
	c.out->target = 0;
	c.out->deg = 0;
#pragma unroll
	for (int i = 0; i < LT_PICK_SPANS; i++)
		c.out->pick_spans[i] = (struct lt_span){0, 0};
	c.out->fe = fe;
	found = bpf_map_lookup_elem(&lt_frontends, &fe);
	if (!found) {
		c.out->status = LT_TEST_NO_SERVICE;
		return 0;
	}
	c.l = lt_loads_take();
	if (!c.l) {
		c.out->status = LT_STAT_SCRATCH_BUSY;
		return 0;
	}
	lt_loads_bind(c.l, found);
	c.out->status = lt_select_in(c.l, labels, &r, &pick);
	c.out->n = c.l->st.n;
	c.out->panic = c.l->st.panic;
	c.out->ep_delta = c.l->svc.ep_delta;
	c.out->pick = pick;
	c.out->rule = c.l->rule;
	c.out->target = c.l->target;
	c.out->deg = c.l->chosen_deg;
	__builtin_memcpy(c.out->pick_spans, c.l->pick, sizeof(c.out->pick_spans));
	bpf_loop(LT_MAX_PRIO, lt_test_copy_prio, &c, 0);
	lt_loads_give(c.l);
	return 0;
}

/*
 * lt_test_bench_table and lt_test_bench_bsearch: args->loops lookups and
 * picks of one service, the source cycling over the args->sources label
 * vectors in lt_test_sources, each as a connect does it (the service
 * value looked up and copied, the tree walked, an endpoint picked). The
 * first walks with the child table (the socket programs' lt_lookup), the
 * second with the binary search over sorted children it replaced, so a
 * benchmark runs both on the same maps (loader/bench_test.go,
 * BenchmarkKernelLookup).
 */
#define LT_TEST_SOURCES 16384

struct lt_test_src {
	__u64 labels[LT_MAX_LEVELS];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, LT_TEST_SOURCES);
	__type(key, __u32);
	__type(value, struct lt_test_src);
} lt_test_sources SEC(".maps");

struct lt_test_bench_args {
	struct lt_addr fe; /* in: the service's VIP */
	__u32 sources;     /* in: label vectors in lt_test_sources */
	__u32 loops;       /* in: lookups per run */
	__u64 found;       /* out: lookups that picked an endpoint */
	__u64 sum;         /* out: sum of the picks (map indices) */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lt_test_bench_args);
} lt_test_bench_res SEC(".maps");

static __always_inline long lt_bench_one(__u64 i, struct lt_test_bench_args *c, const int bsearch)
{
	__u32 k = c->sources ? (__u32)i % c->sources : 0;
	struct lt_test_src *src = bpf_map_lookup_elem(&lt_test_sources, &k);
	struct lt_service *found = bpf_map_lookup_elem(&lt_frontends, &c->fe), svc;
	struct lt_range r = {};
	__u32 pick = 0;

	if (!src || !found)
		return 1;
	__builtin_memcpy(&svc, found, sizeof(svc)); /* as lt_redirect does */
	if (lt_lookup_by(&svc, src->labels, &r, bsearch) != LT_OK || lt_pick(&svc, &r, &pick) != LT_OK)
		return 0;
	c->found++;
	c->sum += pick;
	return 0;
}

static long lt_bench_table_one(__u64 i, void *data)
{
	return lt_bench_one(i, data, 0);
}

static long lt_bench_bsearch_one(__u64 i, void *data)
{
	return lt_bench_one(i, data, 1);
}

static __always_inline int lt_bench(struct lt_test_bench_args *args, const int bsearch)
{
	struct lt_test_bench_args c = {.fe = args->fe, .sources = args->sources};
	struct lt_test_bench_args *out;
	__u32 zero = 0;

	if (bsearch)
		bpf_loop(args->loops, lt_bench_bsearch_one, &c, 0);
	else
		bpf_loop(args->loops, lt_bench_table_one, &c, 0);
	out = bpf_map_lookup_elem(&lt_test_bench_res, &zero);
	if (!out)
		return 1;
	*out = c;
	return 0;
}

SEC("syscall")
int lt_test_bench_table(struct lt_test_bench_args *args)
{
	return lt_bench(args, 0);
}

SEC("syscall")
int lt_test_bench_bsearch(struct lt_test_bench_args *args)
{
	return lt_bench(args, 1);
}

/*
 * lt_test_bench_loads: args->loops picks of one service with a priority
 * load as lt_redirect_loads makes them (its state taken and bound to the
 * service value, lt_select_in from the source labels, given back), the
 * source cycling over the args->sources label vectors in lt_test_sources,
 * or (sources 0) the node's: with one source, every pick after the first
 * takes the loads the first computed (loader/kernel/select_bench_test.go, BenchmarkKernelSelect).
 */
static long lt_bench_loads_one(__u64 i, void *data)
{
	struct lt_test_bench_args *c = data;
	__u32 k = c->sources ? (__u32)i % c->sources : 0;
	struct lt_test_src *src = bpf_map_lookup_elem(&lt_test_sources, &k);
	struct lt_service *found = bpf_map_lookup_elem(&lt_frontends, &c->fe);
	struct lt_range r = {};
	struct lt_loads *l;
	__u32 pick = 0;
	int ret;

	if (!src || !found)
		return 1;
	l = lt_loads_open(found);
	if (!l)
		return 1;
	lt_loads_bind(l, found);
	ret = lt_select_in(l, c->sources ? src->labels : found->src, &r, &pick);
	lt_loads_give(l);
	if (ret != LT_OK)
		return 0;
	c->found++;
	c->sum += pick;
	return 0;
}

SEC("syscall")
int lt_test_bench_loads(struct lt_test_bench_args *args)
{
	struct lt_test_bench_args c = {.fe = args->fe, .sources = args->sources};
	struct lt_test_bench_args *out;
	__u32 zero = 0;

	bpf_loop(args->loops, lt_bench_loads_one, &c, 0);
	out = bpf_map_lookup_elem(&lt_test_bench_res, &zero);
	if (!out)
		return 1;
	*out = c;
	return 0;
}

char __license[] SEC("license") = "Dual BSD/GPL";
