/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Socket redirect: rewriting a socket's destination to a picked backend,
 * and what the programs remember of it by socket cookie (lt_socks, for
 * getpeername, for keeping a UDP socket on one backend and for
 * least_connections counts; lt_rev, for recvmsg).
 */
#ifndef LOCTREE_LIB_SOCK_H
#define LOCTREE_LIB_SOCK_H

#include "common.h"
#include "maps.h"
#include "pick.h"
#include "traffic.h"
#include "widen.h"

#define ECONNREFUSED 111
#define SK_PASS 1
#define SK_DROP 0

#define IPPROTO_UDP 17

/*
 * Per-socket state (lt_socks, by socket cookie): the VIP the socket
 * addressed and the backend it was sent to, for getpeername, for keeping an
 * unconnected UDP socket on one backend, for least_connections and
 * load-aware counts, and for the traffic counts' key of its bytes.
 */
struct lt_sock {
	struct lt_addr vip;
	struct lt_addr backend;
	__u32 ep; /* map index of backend when it was picked */
	/* The next four bytes are one aligned word for lt_bytes_swap. */
	__u8 counted;      /* 1: lt_conns[backend] was incremented for this socket */
	__u8 widen_levels; /* load-aware: the nodes of widen's path counted, from the leaf up (widen.h) */
	__u8 bytes;        /* LT_BYTES_*: who counts the socket's bytes and deletes the entry */
	__u8 pad;
	struct lt_widen_key widen; /* load-aware: the leaf whose path counts this socket; svc 0: none */
	__u64 src;                 /* the traffic counts' source of its pick (traffic.h) */
};

/*
 * lt_sock.bytes. A TCP socket's entry outlives sock_release until its
 * TCP_CLOSE state change, where lt_sockops reads its byte counters; which
 * of the two comes first depends on who closes, so the last one deletes
 * the entry. The state is a byte of a word the two swap atomically: a
 * reset may close the socket on another CPU while the process releases
 * it. (Not a word of its own: lt_redirect's stack has 8 bytes to spare,
 * which src takes.)
 */
#define LT_BYTES_NONE 0     /* not armed: sock_release deletes the entry */
#define LT_BYTES_ARMED 1    /* lt_sockops counts the bytes at TCP_CLOSE */
#define LT_BYTES_CLOSED 2   /* counted at TCP_CLOSE before sock_release, which deletes the entry */
#define LT_BYTES_RELEASED 3 /* released before TCP_CLOSE, which counts and deletes the entry */
#define LT_BYTES_SHIFT 16   /* lt_sock.bytes in the word at lt_sock.counted (little endian) */

_Static_assert(__builtin_offsetof(struct lt_sock, counted) % 4 == 0 &&
		       __builtin_offsetof(struct lt_sock, bytes) == __builtin_offsetof(struct lt_sock, counted) + LT_BYTES_SHIFT / 8,
	       "lt_bytes_swap: counted must start an aligned word holding bytes at LT_BYTES_SHIFT");

/*
 * lt_bytes_swap moves s's bytes state from one of the states in the mask
 * from (bit n: state n) to state to, atomically; it returns the state it
 * found (moved only if in from). Two tries: the only other writer moves
 * the state once.
 */
static __always_inline __u32 lt_bytes_swap(struct lt_sock *s, __u32 from, __u32 to)
{
	for (int i = 0; i < 2; i++) {
		__u32 *word = (__u32 *)&s->counted;
		__u32 old = *(volatile __u32 *)word, state = (old >> LT_BYTES_SHIFT) & 0xff;
		__u32 new = (old & ~(0xffu << LT_BYTES_SHIFT)) | (to << LT_BYTES_SHIFT);

		if (!(from & (1u << state)))
			return state;
		if (__sync_val_compare_and_swap(word, old, new) == old)
			return state;
	}
	return LT_BYTES_NONE; /* cannot happen: treated as not armed */
}

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

/*
 * Reverse translation for UDP: (socket, backend) -> VIP, for every backend
 * a socket sent to, so a reply still in flight from an earlier backend is
 * shown from the VIP too. An LRU as Cilium's reverse socket map: entries of
 * closed sockets age out (their cookies are never reused).
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, LT_DEF_SOCKETS);
	__type(key, struct lt_rev_key);
	__type(value, struct lt_addr);
} lt_rev SEC(".maps");

/* lt_conns_add counts one more connection to backend b. */
static __always_inline int lt_conns_add(const struct lt_addr *b)
{
	__u64 zero = 0, *c = bpf_map_lookup_elem(&lt_conns, b);

	if (!c) {
		bpf_map_update_elem(&lt_conns, b, &zero, BPF_NOEXIST);
		c = bpf_map_lookup_elem(&lt_conns, b);
	}
	if (!c)
		return 0;
	__sync_fetch_and_add(c, 1);
	return 1;
}

/* lt_conns_sub gives one connection back, never below zero: a
 * compare-and-swap loop, so two sockets closing at once cannot both take
 * the last count. */
static __always_inline void lt_conns_sub(const struct lt_addr *b)
{
	__u64 *c = bpf_map_lookup_elem(&lt_conns, b);

	if (!c)
		return;
	for (int i = 0; i < 16; i++) {
		__u64 old = *(volatile __u64 *)c;

		if (old == 0 || __sync_val_compare_and_swap(c, old, old - 1) == old)
			return;
	}
}

/* lt_uncount gives back the least_connections count and the load-aware
 * node counts of a socket entry. */
static __always_inline void lt_uncount(const struct lt_sock *s)
{
	if (s->counted)
		lt_conns_sub(&s->backend);
	if (s->widen.svc)
		lt_widen_add(&s->widen, -1, s->widen_levels);
}

/* lt_refuse makes the syscall fail with ECONNREFUSED, counted by reason. */
static __always_inline int lt_refuse(__u32 reason)
{
	lt_count(reason);
	bpf_set_retval(-ECONNREFUSED);
	return SK_DROP;
}

#define LT_V4MAPPED 0xffff0000 /* ::ffff:0:0/96, word 2 in network byte order (little endian) */

/* lt_v4mapped reports an IPv6 socket addressing an IPv4 peer. */
static __always_inline int lt_v4mapped(struct bpf_sock_addr *ctx)
{
	return ctx->user_ip6[0] == 0 && ctx->user_ip6[1] == 0 && ctx->user_ip6[2] == LT_V4MAPPED;
}

/* lt_addr_of reads the socket address (a v4-mapped one as IPv4). */
static __always_inline void lt_addr_of(struct bpf_sock_addr *ctx, struct lt_addr *a, int v6)
{
	__builtin_memset(a, 0, sizeof(*a));
	a->port = (__u16)ctx->user_port;
	if (v6 && lt_v4mapped(ctx)) {
		a->family = LT_FAMILY_V4;
		a->addr[0] = ctx->user_ip6[3];
	} else if (v6) {
		a->family = LT_FAMILY_V6;
		a->addr[0] = ctx->user_ip6[0];
		a->addr[1] = ctx->user_ip6[1];
		a->addr[2] = ctx->user_ip6[2];
		a->addr[3] = ctx->user_ip6[3];
	} else {
		a->family = LT_FAMILY_V4;
		a->addr[0] = ctx->user_ip4;
	}
}

/* lt_set_addr rewrites the socket address; an IPv4 address on an IPv6
 * socket is written v4-mapped. */
static __always_inline void lt_set_addr(struct bpf_sock_addr *ctx, int v6, const struct lt_addr *a)
{
	if (v6 && a->family == LT_FAMILY_V4) {
		ctx->user_ip6[0] = 0;
		ctx->user_ip6[1] = 0;
		ctx->user_ip6[2] = LT_V4MAPPED;
		ctx->user_ip6[3] = a->addr[0];
	} else if (v6) {
		ctx->user_ip6[0] = a->addr[0];
		ctx->user_ip6[1] = a->addr[1];
		ctx->user_ip6[2] = a->addr[2];
		ctx->user_ip6[3] = a->addr[3];
	} else {
		ctx->user_ip4 = a->addr[0];
	}
	ctx->user_port = a->port;
}

static __always_inline int lt_same(const struct lt_addr *a, const struct lt_addr *b)
{
	return a->addr[0] == b->addr[0] && a->addr[1] == b->addr[1] && a->addr[2] == b->addr[2] &&
	       a->addr[3] == b->addr[3] && a->port == b->port && a->family == b->family;
}

/*
 * lt_kept reports whether a socket's earlier backend may serve this
 * datagram too: same VIP, and the endpoint is still at its index inside
 * the candidate range (Cilium keeps a UDP socket's backend while it is
 * valid; here: while it is a candidate).
 */
static __always_inline int lt_kept(const struct lt_sock *s, const struct lt_addr *fe, const struct lt_range *r)
{
	struct lt_endpoint *ep;
	struct lt_addr b;

	if (!lt_same(&s->vip, fe) || s->ep < r->lo || s->ep >= r->hi)
		return 0;
	ep = lt_ep_at(s->ep);
	if (!ep)
		return 0;
	lt_backend_of(ep, &b);
	return lt_same(&b, &s->backend);
}

/* lt_rev_add lets replies from backend b on this socket show the VIP;
 * written only when the entry is missing or names another VIP. */
static __always_inline void lt_rev_add(__u64 cookie, const struct lt_addr *b, const struct lt_addr *fe)
{
	struct lt_rev_key k = {.cookie = cookie, .backend = *b};
	struct lt_addr *vip = bpf_map_lookup_elem(&lt_rev, &k);

	if (!vip || !lt_same(vip, fe))
		bpf_map_update_elem(&lt_rev, &k, fe, BPF_ANY);
}

/* lt_remember records the VIP and the new backend of a redirected socket,
 * counted on its endpoint's path when wsvc, its service, is load-aware. */
static __always_inline void lt_remember(__u64 cookie, const struct lt_sock *old, const struct lt_addr *fe,
					const struct lt_addr *b, __u32 idx, int count, const struct lt_service *wsvc, __u64 src)
{
	struct lt_sock s = {.vip = *fe, .backend = *b, .ep = idx, .src = src};

	if (old) /* a reconnect, or a datagram to another backend */
		lt_uncount(old);
	if (count)
		s.counted = lt_conns_add(b);
	if (lt_widen_leaf(wsvc, idx, &s.widen))
		s.widen_levels = lt_widen_add(&s.widen, 1, LT_MAX_LEVELS);
	if (bpf_map_update_elem(&lt_socks, &cookie, &s, BPF_ANY) != 0) {
		lt_uncount(&s); /* nobody would give it back */
		lt_count(LT_STAT_SOCKS_FULL);
	}
}

/*
 * lt_keep sends a socket whose backend (old) is still a candidate in r
 * back to it, without a map update, and returns 1; 0 when it has none.
 */
static __always_inline int lt_keep(struct bpf_sock_addr *ctx, int v6, const struct lt_sock *old, const struct lt_addr *fe,
				   const struct lt_range *r)
{
	if (!old || !lt_kept(old, fe, r))
		return 0;
	lt_set_addr(ctx, v6, &old->backend);
	lt_count(LT_STAT_REDIRECT);
	return 1;
}

/*
 * lt_redirect_to rewrites the destination to endpoint idx of the service
 * at fe and records it for the socket (and, for UDP, for its replies) and
 * in the traffic counts: the end of every new pick. wsvc is the service
 * when it may be load-aware (widen.h), else NULL. It returns SK_PASS, or
 * refuses.
 */
static __always_inline int lt_redirect_to(struct bpf_sock_addr *ctx, int v6, __u32 proto, __u64 cookie,
					  const struct lt_sock *old, const struct lt_addr *fe, __u32 idx, __u8 policy,
					  const struct lt_service *wsvc)
{
	struct lt_endpoint *ep = lt_ep_at(idx);
	struct lt_addr b;
	__u64 src;

	if (!ep)
		return lt_refuse(LT_STAT_BAD_INDEX);
	if (ep->family != fe->family)
		return lt_refuse(LT_STAT_BAD_FAMILY);
	lt_backend_of(ep, &b);
	lt_set_addr(ctx, v6, &b);
	src = lt_traffic_source();
	lt_remember(cookie, old, fe, &b, idx, lt_counts(policy), wsvc, src);
	if (proto == IPPROTO_UDP)
		lt_rev_add(cookie, &b, fe);
	lt_traffic_add(src, fe, &b, 1, 0, 0);
	lt_count(LT_STAT_REDIRECT);
	return SK_PASS;
}

#endif /* LOCTREE_LIB_SOCK_H */
