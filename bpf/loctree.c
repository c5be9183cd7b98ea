//go:build ignore
// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * loctree socket programs: a connect (TCP, connected UDP) or an unconnected
 * UDP sendmsg to a service VIP:port walks the service's locality tree with
 * this node's source labels, picks an endpoint by the service's policy and
 * rewrites the destination. getpeername and recvmsg show the VIP again.
 * Anything that is not a VIP passes untouched.
 */
#include "lib/common.h"
#include "lib/maps.h"
#include "lib/source.h"
#include "lib/lookup.h"
#include "lib/affinity.h"
#include "lib/sock.h"
#include "lib/loads.h"
#include "lib/select.h"
#include "lib/widen.h"

/*
 * lt_redirect handles one connect or sendmsg. It returns SK_PASS for
 * anything that is not a VIP and for a successful rewrite. A socket that
 * already has a backend which is still a candidate keeps it, without a map
 * update; UDP sockets record every backend they used for recvmsg. A
 * load-aware service's candidates are widened first (lib/widen.h), and a
 * new pick is counted on its endpoint's path.
 */
static __noinline int lt_redirect(struct bpf_sock_addr *ctx, int v6, __u32 proto)
{
	struct lt_service *found, svc;
	struct lt_addr fe;
	__u64 cookie;
	struct lt_sock *old;
	struct lt_range r;
	__u32 idx = 0;
	int ret;

	lt_addr_of(ctx, &fe, v6);
	found = bpf_map_lookup_elem(&lt_frontends, &fe);
	if (!found)
		return SK_PASS;
	/* One copy of the published value: the walk never mixes two of them. */
	__builtin_memcpy(&svc, found, sizeof(svc));
	{
		/* In a block: its slots are free again for the pick. */
		__u64 labels[LT_MAX_LEVELS];

		lt_source_labels(&svc, labels);
		ret = lt_lookup(&svc, labels, &r);
	}
	if (ret == LT_OK)
		ret = lt_widen_range(&svc, &r);
	if (ret != LT_OK)
		return lt_refuse(ret);
	cookie = bpf_get_socket_cookie(ctx);
	old = bpf_map_lookup_elem(&lt_socks, &cookie);
	if (lt_keep(ctx, v6, old, &fe, &r))
		return SK_PASS;
	ret = lt_pick_for(ctx, &svc, &fe, &r, &idx);
	if (ret != LT_OK)
		return lt_refuse(ret);
	return lt_redirect_to(ctx, v6, proto, cookie, old, &fe, idx, svc.policy, &svc);
}

/*
 * lt_redirect_loads handles one connect or sendmsg to a service with a
 * priority load (lib/select.h) as lt_redirect does any other; it returns
 * -1, touching nothing, when the address is not such a service. Its own
 * subprogram: lt_redirect's frame and the priority computation's do not
 * fit the 512-byte BPF stack together, so the service's copy, the source
 * labels and the loads live in the service's lt_loads_cache entry or a
 * scratch slot (lib/loads.h).
 */
static __noinline int lt_redirect_loads(struct bpf_sock_addr *ctx, int v6, __u32 proto)
{
	struct lt_service *found;
	struct lt_addr fe;
	struct lt_loads *l;
	struct lt_sock *old;
	struct lt_range r = {};
	__u64 cookie;
	__u32 idx = 0, prio, deg;
	__u8 policy;
	int ret;

	lt_addr_of(ctx, &fe, v6);
	found = bpf_map_lookup_elem(&lt_frontends, &fe);
	if (!found || found->of == 0)
		return -1;
	l = lt_loads_open(found);
	if (!l)
		return lt_refuse(LT_STAT_SCRATCH_BUSY);
	lt_loads_bind(l, found); /* one copy, as lt_redirect's */
	__builtin_memset(&l->aff, 0, sizeof(l->aff));
	if (l->svc.policy == LT_POLICY_CONSISTENT_HASH) {
		l->aff.client = bpf_get_netns_cookie(ctx);
		l->aff.fe = fe;
	}
	ret = lt_select_in(l, lt_source(&l->svc, l->own), &r, &idx);
	policy = l->svc.policy;
	prio = l->chosen;
	deg = l->chosen_deg;
	lt_loads_give(l);
	if (ret == LT_NO_LOADS)
		return -1; /* replaced meanwhile by a plain service: lt_redirect serves it */
	if (ret != LT_OK)
		return lt_refuse(ret);
	cookie = bpf_get_socket_cookie(ctx);
	old = bpf_map_lookup_elem(&lt_socks, &cookie);
	if (lt_keep(ctx, v6, old, &fe, &r))
		return SK_PASS; /* not a new pick: not counted by priority */
	ret = lt_redirect_to(ctx, v6, proto, cookie, old, &fe, idx, policy, NULL);
	if (ret == SK_PASS)
		lt_count_prio(prio, deg);
	return ret;
}

/*
 * lt_handle serves a service with a priority load (priority.h) or else
 * any other VIP (lt_redirect). Two subprograms, not one: each needs most of
 * the 512-byte BPF stack, and the verifier adds up the frames of a call
 * chain. proto is the socket's protocol, compared only where UDP differs:
 * a flag computed up front is a branch, and the verifier would check
 * everything after it twice, once per constant (program load time).
 */
static __always_inline int lt_handle(struct bpf_sock_addr *ctx, int v6, __u32 proto)
{
	int ret = lt_redirect_loads(ctx, v6, proto);

	return ret >= 0 ? ret : lt_redirect(ctx, v6, proto);
}

SEC("cgroup/connect4")
int lt_connect4(struct bpf_sock_addr *ctx)
{
	return lt_handle(ctx, 0, ctx->protocol);
}

SEC("cgroup/connect6")
int lt_connect6(struct bpf_sock_addr *ctx)
{
	return lt_handle(ctx, 1, ctx->protocol);
}

SEC("cgroup/sendmsg4")
int lt_sendmsg4(struct bpf_sock_addr *ctx)
{
	return lt_handle(ctx, 0, IPPROTO_UDP);
}

SEC("cgroup/sendmsg6")
int lt_sendmsg6(struct bpf_sock_addr *ctx)
{
	return lt_handle(ctx, 1, IPPROTO_UDP);
}

/* lt_restore_vip shows the VIP where a connected socket talks to its backend (getpeername). */
static __always_inline int lt_restore_vip(struct bpf_sock_addr *ctx, int v6)
{
	__u64 cookie = bpf_get_socket_cookie(ctx);
	struct lt_sock *s = bpf_map_lookup_elem(&lt_socks, &cookie);

	if (s && (v6 || s->vip.family == LT_FAMILY_V4))
		lt_set_addr(ctx, v6, &s->vip);
	return SK_PASS;
}

/* lt_restore_from shows the VIP as the source of a datagram from any
 * backend this socket sent to (recvmsg). */
static __always_inline int lt_restore_from(struct bpf_sock_addr *ctx, int v6)
{
	struct lt_rev_key k = {.cookie = bpf_get_socket_cookie(ctx)};
	struct lt_addr *vip;

	lt_addr_of(ctx, &k.backend, v6);
	vip = bpf_map_lookup_elem(&lt_rev, &k);
	if (vip && (v6 || vip->family == LT_FAMILY_V4))
		lt_set_addr(ctx, v6, vip);
	return SK_PASS;
}

SEC("cgroup/getpeername4")
int lt_getpeername4(struct bpf_sock_addr *ctx)
{
	return lt_restore_vip(ctx, 0);
}

SEC("cgroup/getpeername6")
int lt_getpeername6(struct bpf_sock_addr *ctx)
{
	return lt_restore_vip(ctx, 1);
}

SEC("cgroup/recvmsg4")
int lt_recvmsg4(struct bpf_sock_addr *ctx)
{
	return lt_restore_from(ctx, 0);
}

SEC("cgroup/recvmsg6")
int lt_recvmsg6(struct bpf_sock_addr *ctx)
{
	return lt_restore_from(ctx, 1);
}

/*
 * lt_sock_release forgets a closed socket and gives back its
 * least_connections count. A TCP socket whose bytes lt_sockops counts
 * keeps its entry, given back, until its TCP_CLOSE (lib/sock.h,
 * LT_BYTES_*): sock_release runs before the protocol's close, and a
 * cgroup/sock_release program may not read the TCP byte counters.
 */
SEC("cgroup/sock_release")
int lt_sock_release(struct bpf_sock *sk)
{
	struct lt_rev_key k = {.cookie = bpf_get_socket_cookie(sk)};
	struct lt_sock *s = bpf_map_lookup_elem(&lt_socks, &k.cookie);

	if (!s)
		return SK_PASS;
	k.backend = s->backend;
	lt_uncount(s);
	bpf_map_delete_elem(&lt_rev, &k); /* earlier backends' entries age out */
	if (s->bytes == LT_BYTES_ARMED && lt_bytes_swap(s, 1u << LT_BYTES_ARMED, LT_BYTES_RELEASED) == LT_BYTES_ARMED)
		return SK_PASS; /* given back; lt_sockops deletes it at TCP_CLOSE */
	bpf_map_delete_elem(&lt_socks, &k.cookie);
	return SK_PASS;
}

/*
 * lt_sockops counts the bytes of the TCP connections loctree redirected,
 * once per connection: once the connect is established it asks for state
 * changes of a socket that has an entry in lt_socks (one lookup; any other
 * socket is left alone and never calls back), and at its TCP_CLOSE it adds
 * the socket's bytes_acked and bytes_received to its pick's traffic
 * counts. No per-packet work: the kernel keeps those counters anyway.
 * Armed at ACTIVE_ESTABLISHED, not at TCP_CONNECT: the SYN_SENT ->
 * ESTABLISHED change would call it once more per connect, for nothing, and
 * a connect that never establishes has no bytes.
 */
SEC("sockops")
int lt_sockops(struct bpf_sock_ops *ctx)
{
	__u64 cookie;
	struct lt_sock *s;
	__u32 was;

	if (ctx->op != BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB &&
	    (ctx->op != BPF_SOCK_OPS_STATE_CB || ctx->args[1] != BPF_TCP_CLOSE))
		return 1;
	cookie = bpf_get_socket_cookie(ctx);
	s = bpf_map_lookup_elem(&lt_socks, &cookie);
	if (!s)
		return 1;
	if (ctx->op == BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB) {
		s->bytes = LT_BYTES_ARMED;
		bpf_sock_ops_cb_flags_set(ctx, ctx->bpf_sock_ops_cb_flags | BPF_SOCK_OPS_STATE_CB_FLAG);
		return 1;
	}
	was = lt_bytes_swap(s, 1u << LT_BYTES_ARMED | 1u << LT_BYTES_RELEASED, LT_BYTES_CLOSED);
	if (was != LT_BYTES_ARMED && was != LT_BYTES_RELEASED)
		return 1;
	lt_traffic_add(s->src, &s->vip, &s->backend, 0, ctx->bytes_acked, ctx->bytes_received);
	if (was == LT_BYTES_RELEASED)
		bpf_map_delete_elem(&lt_socks, &cookie);
	return 1;
}

char __license[] SEC("license") = "Dual BSD/GPL";
