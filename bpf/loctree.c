//go:build ignore
// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * loctree socket programs: a connect (TCP, connected UDP) or an unconnected
 * UDP sendmsg to a service VIP:port walks the service's locality tree with
 * this node's source labels, picks an endpoint by the service's policy and
 * rewrites the destination. getpeername and recvmsg show the VIP again.
 * Anything that is not a VIP passes untouched.
 */
#include "loctree.h"

#define ECONNREFUSED 111
#define SK_PASS 1
#define SK_DROP 0

/*
 * Redirected sockets by socket cookie, deleted by sock_release. A hash, not
 * socket storage: creating socket storage on every connect measured about
 * twice the cost of the whole lookup. Not an LRU either: evicting a live
 * socket would leak its least_connections count. When the map is full, a
 * new socket is still redirected but not remembered (LT_STAT_SOCKS_FULL).
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, LT_DEF_SOCKETS);
	__type(key, __u64);
	__type(value, struct lt_sock);
} lt_socks SEC(".maps");

/* lt_uncount gives back the least_connections count of a socket entry. */
static __always_inline void lt_uncount(const struct lt_sock *s)
{
	__u32 ep = s->ep;
	__u64 *c;

	if (!s->counted)
		return;
	c = bpf_map_lookup_elem(&lt_conns, &ep);
	if (c && *c > 0)
		__sync_fetch_and_add(c, -1);
}

/* lt_refuse makes the syscall fail with ECONNREFUSED. */
static __always_inline int lt_refuse(__u32 stat)
{
	lt_count(stat);
	bpf_set_retval(-ECONNREFUSED);
	return SK_DROP;
}

#define LT_V4MAPPED 0xffff0000 /* ::ffff:0:0/96, word 2 in network byte order (little endian) */

/* lt_v4mapped reports an IPv6 socket addressing an IPv4 peer. */
static __always_inline int lt_v4mapped(struct bpf_sock_addr *ctx)
{
	return ctx->user_ip6[0] == 0 && ctx->user_ip6[1] == 0 && ctx->user_ip6[2] == LT_V4MAPPED;
}

static __always_inline void lt_frontend_of(struct bpf_sock_addr *ctx, struct lt_frontend *fe,
					   int v6)
{
	__builtin_memset(fe, 0, sizeof(*fe));
	fe->port = (__u16)ctx->user_port;
	if (v6 && lt_v4mapped(ctx)) {
		fe->family = LT_FAMILY_V4;
		fe->addr[0] = ctx->user_ip6[3];
	} else if (v6) {
		fe->family = LT_FAMILY_V6;
		fe->addr[0] = ctx->user_ip6[0];
		fe->addr[1] = ctx->user_ip6[1];
		fe->addr[2] = ctx->user_ip6[2];
		fe->addr[3] = ctx->user_ip6[3];
	} else {
		fe->family = LT_FAMILY_V4;
		fe->addr[0] = ctx->user_ip4;
	}
}

/* lt_set_addr rewrites the socket address; an IPv4 address on an IPv6
 * socket is written v4-mapped. */
static __always_inline void lt_set_addr(struct bpf_sock_addr *ctx, int v6, int v4, const __u32 *addr,
					__u16 port)
{
	if (v6 && v4) {
		ctx->user_ip6[0] = 0;
		ctx->user_ip6[1] = 0;
		ctx->user_ip6[2] = LT_V4MAPPED;
		ctx->user_ip6[3] = addr[0];
	} else if (v6) {
		ctx->user_ip6[0] = addr[0];
		ctx->user_ip6[1] = addr[1];
		ctx->user_ip6[2] = addr[2];
		ctx->user_ip6[3] = addr[3];
	} else {
		ctx->user_ip4 = addr[0];
	}
	ctx->user_port = port;
}

/* lt_remember records the VIP and backend of a redirected socket. */
static __always_inline void lt_remember(struct bpf_sock_addr *ctx, const struct lt_frontend *fe,
					const struct lt_endpoint *ep, __u32 idx, int v6, int count)
{
	__u64 cookie = bpf_get_socket_cookie(ctx);
	struct lt_sock s = {}, *old;

	old = bpf_map_lookup_elem(&lt_socks, &cookie);
	if (old) /* a reconnect or another datagram */
		lt_uncount(old);
	__builtin_memcpy(s.vip, fe->addr, sizeof(s.vip));
	__builtin_memcpy(s.backend, ep->addr, sizeof(s.backend));
	s.vip_port = fe->port;
	s.backend_port = ep->port;
	s.family = fe->family;
	s.mapped = v6 && fe->family == LT_FAMILY_V4;
	s.ep = idx;
	if (count) {
		__u64 *c = bpf_map_lookup_elem(&lt_conns, &idx);

		if (c) {
			__sync_fetch_and_add(c, 1);
			s.counted = 1;
		}
	}
	if (bpf_map_update_elem(&lt_socks, &cookie, &s, BPF_ANY) != 0) {
		lt_uncount(&s); /* nobody would give it back */
		lt_count(LT_STAT_SOCKS_FULL);
	}
}

/*
 * lt_redirect handles one connect or sendmsg. It returns SK_PASS for
 * anything that is not a VIP and for a successful rewrite.
 */
static __always_inline int lt_redirect(struct bpf_sock_addr *ctx, int v6)
{
	struct lt_frontend fe;
	struct lt_service *found, svc;
	__u64 labels[LT_MAX_LEVELS];
	struct lt_endpoint *ep;
	struct lt_range r;
	__u32 idx = 0;
	int ret;

	lt_frontend_of(ctx, &fe, v6);
	found = bpf_map_lookup_elem(&lt_frontends, &fe);
	if (!found)
		return SK_PASS;
	/* One copy of the published value: the walk never mixes two of them. */
	__builtin_memcpy(&svc, found, sizeof(svc));
	ret = lt_lookup(&svc, lt_source(&svc, lt_task_locality(), labels), &r);
	if (ret == -1)
		return lt_refuse(LT_STAT_NO_MATCH);
	if (ret < 0 || lt_pick(&svc, &r, &idx) < 0)
		return lt_refuse(LT_STAT_ERROR);
	ep = lt_ep_at(idx);
	if (!ep || ep->family != fe.family)
		return lt_refuse(LT_STAT_ERROR);
	lt_set_addr(ctx, v6, fe.family == LT_FAMILY_V4, ep->addr, ep->port);
	lt_remember(ctx, &fe, ep, idx, v6, svc.policy == LT_POLICY_LEAST_CONNECTIONS);
	lt_count(LT_STAT_REDIRECT);
	return SK_PASS;
}

SEC("cgroup/connect4")
int lt_connect4(struct bpf_sock_addr *ctx)
{
	return lt_redirect(ctx, 0);
}

SEC("cgroup/connect6")
int lt_connect6(struct bpf_sock_addr *ctx)
{
	return lt_redirect(ctx, 1);
}

SEC("cgroup/sendmsg4")
int lt_sendmsg4(struct bpf_sock_addr *ctx)
{
	return lt_redirect(ctx, 0);
}

SEC("cgroup/sendmsg6")
int lt_sendmsg6(struct bpf_sock_addr *ctx)
{
	return lt_redirect(ctx, 1);
}

/* lt_same_addr compares the socket address with a remembered one. The
 * context is read field by field into locals: the verifier rejects reads
 * through a ctx pointer the compiler has moved. */
static __always_inline int lt_same_addr(struct bpf_sock_addr *ctx, int v6, int v4, const __u32 *addr,
					__u16 port)
{
	__u32 w0, w1, w2, w3, p;

	p = ctx->user_port;
	if (!v6) {
		w3 = ctx->user_ip4;
		return p == port && w3 == addr[0];
	}
	w0 = ctx->user_ip6[0];
	w1 = ctx->user_ip6[1];
	w2 = ctx->user_ip6[2];
	w3 = ctx->user_ip6[3];
	if (p != port)
		return 0;
	if (v4)
		return w0 == 0 && w1 == 0 && w2 == LT_V4MAPPED && w3 == addr[0];
	return w0 == addr[0] && w1 == addr[1] && w2 == addr[2] && w3 == addr[3];
}

/* lt_restore_vip shows the VIP where the socket talks to its backend. */
static __always_inline int lt_restore_vip(struct bpf_sock_addr *ctx, int v6, int match_backend)
{
	__u64 cookie = bpf_get_socket_cookie(ctx);
	struct lt_sock *s;
	int v4;

	s = bpf_map_lookup_elem(&lt_socks, &cookie);
	if (!s)
		return SK_PASS;
	v4 = s->family == LT_FAMILY_V4;
	if (v6 ? (!v4 && s->family != LT_FAMILY_V6) || (v4 && !s->mapped) : !v4)
		return SK_PASS;
	if (match_backend && !lt_same_addr(ctx, v6, v4, s->backend, s->backend_port))
		return SK_PASS;
	lt_set_addr(ctx, v6, v4, s->vip, s->vip_port);
	return SK_PASS;
}

SEC("cgroup/getpeername4")
int lt_getpeername4(struct bpf_sock_addr *ctx)
{
	return lt_restore_vip(ctx, 0, 0);
}

SEC("cgroup/getpeername6")
int lt_getpeername6(struct bpf_sock_addr *ctx)
{
	return lt_restore_vip(ctx, 1, 0);
}

SEC("cgroup/recvmsg4")
int lt_recvmsg4(struct bpf_sock_addr *ctx)
{
	return lt_restore_vip(ctx, 0, 1);
}

SEC("cgroup/recvmsg6")
int lt_recvmsg6(struct bpf_sock_addr *ctx)
{
	return lt_restore_vip(ctx, 1, 1);
}

/* lt_sock_release forgets a closed socket and gives back its least_connections count. */
SEC("cgroup/sock_release")
int lt_sock_release(struct bpf_sock *sk)
{
	__u64 cookie = bpf_get_socket_cookie(sk);
	struct lt_sock *s = bpf_map_lookup_elem(&lt_socks, &cookie);

	if (!s)
		return SK_PASS;
	lt_uncount(s);
	bpf_map_delete_elem(&lt_socks, &cookie);
	return SK_PASS;
}

char __license[] SEC("license") = "Dual BSD/GPL";
