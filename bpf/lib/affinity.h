/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * consistent_hash in the kernel: session affinity by client, with the
 * semantics of Kubernetes' sessionAffinity: ClientIP.
 *
 * The client is the calling socket's network namespace (its netns cookie):
 * the pod, whose containers share one netns and one IP, as ClientIP means;
 * hostNetwork pods share the node's netns and its IP, and so one key too. A
 * connect hook runs before bind, so it has no source IP to key by.
 *
 * A client's first connection to a service picks by jump consistent hash of
 * (client, service) over the candidate range, O(log n), and remembers the
 * backend in lt_affinity with the time of its last use, as Cilium's
 * lb4_affinity_* (bpf/lib/lb.h) and kube-proxy's affinity sets do. Later
 * connections within the service's timeout go to the remembered backend
 * while it is still in the client's candidate range; it is found by address
 * (lt_aff_eps, written by the loader for consistent_hash services), so an
 * update that shifts the endpoint array moves nobody whose backend stayed.
 * With a priority load (priority.h) the client's hash also draws the
 * priority, as Envoy's choosePriority takes the request hash, and the
 * candidates are that priority's spans (lt_affinity_spans).
 */
#ifndef LOCTREE_LIB_AFFINITY_H
#define LOCTREE_LIB_AFFINITY_H

#include "common.h"
#include "maps.h"
#include "pick.h"

#define LT_AFF_DEFAULT_TIMEOUT 10800 /* seconds: Kubernetes' DefaultClientIPServiceAffinitySeconds */
#define LT_NS_PER_SEC 1000000000ULL
#define LT_JUMP_MAX_STEPS 64 /* jump hash: about ln(n) steps expected; the bound ends the rest */
#define LT_DEF_AFFINITIES 65536

/* Key of lt_affinity: a client (netns cookie) and a service's VIP:port. */
struct lt_aff_key {
	__u64 client;
	struct lt_addr fe;
	__u32 pad;
};

/* Value of lt_affinity: the client's backend and when it last used it. */
struct lt_aff {
	struct lt_addr backend;
	__u32 ep;      /* map index of backend when last seen */
	__u64 last_ns; /* bpf_ktime_get_ns of the last connection */
};

/* Key of lt_aff_eps: a consistent_hash service and one of its backends. */
struct lt_aff_ep_key {
	struct lt_addr fe;
	struct lt_addr backend;
};

/* Client → backend per service. An LRU: idle clients age out. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, LT_DEF_AFFINITIES);
	__type(key, struct lt_aff_key);
	__type(value, struct lt_aff);
} lt_affinity SEC(".maps");

/*
 * (service, backend) → map index of the endpoint, written by the loader
 * before it publishes a consistent_hash service. Stale entries are harmless:
 * an index is used only when the endpoint there has that address and lies
 * in the candidate range.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, LT_DEF_ENDPOINTS);
	__type(key, struct lt_aff_ep_key);
	__type(value, __u32);
} lt_aff_eps SEC(".maps");

/* lt_mix64 is the splitmix64 finalizer. */
static __always_inline __u64 lt_mix64(__u64 x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

/* lt_aff_hash is the hash of a client and a service, the jump hash key. */
static __always_inline __u64 lt_aff_hash(const struct lt_aff_key *k)
{
	__u64 h = lt_mix64(k->client);

	h = lt_mix64(h ^ (((__u64)k->fe.addr[0] << 32) | k->fe.addr[1]));
	h = lt_mix64(h ^ (((__u64)k->fe.addr[2] << 32) | k->fe.addr[3]));
	return lt_mix64(h ^ (((__u64)k->fe.port << 8) | k->fe.family));
}

/*
 * lt_jump is jump consistent hash (Lamping and Veach, "A Fast, Minimal
 * Memory, Consistent Hash Algorithm", 2014) in integers: a bucket in [0, n).
 */
static __always_inline __u32 lt_jump(__u64 key, __u32 n)
{
	__u64 b = 0, j = 0;

	for (int s = 0; s < LT_JUMP_MAX_STEPS && j < n; s++) {
		b = j;
		key = key * 2862933555777941757ULL + 1;
		j = ((b + 1) << 31) / ((key >> 33) + 1);
	}
	return (__u32)b;
}

/* lt_aff_holds reports whether endpoint idx is backend b and a candidate in r. */
static __always_inline int lt_aff_holds(__u32 idx, const struct lt_addr *b, const struct lt_range *r)
{
	struct lt_endpoint *ep;

	if (idx < r->lo || idx >= r->hi)
		return 0;
	ep = lt_ep_at(idx);
	return ep && ep->addr[0] == b->addr[0] && ep->addr[1] == b->addr[1] && ep->addr[2] == b->addr[2] &&
	       ep->addr[3] == b->addr[3] && ep->port == b->port && ep->family == b->family;
}

/* lt_aff_find finds a remembered backend in r: at its last index, else by address. */
static __always_inline int lt_aff_find(const struct lt_addr *fe, const struct lt_aff *a, const struct lt_range *r,
				       __u32 *out)
{
	struct lt_aff_ep_key k = {.fe = *fe, .backend = a->backend};
	__u32 *idx;

	if (lt_aff_holds(a->ep, &a->backend, r)) {
		*out = a->ep;
		return 1;
	}
	idx = bpf_map_lookup_elem(&lt_aff_eps, &k);
	if (!idx || !lt_aff_holds(*idx, &a->backend, r))
		return 0;
	*out = *idx;
	return 1;
}

/* lt_aff_live reports whether a client's affinity a (NULL: none) still
 * holds at now: it was used within the service's timeout. */
static __always_inline int lt_aff_live(const struct lt_service *svc, const struct lt_aff *a, __u64 now)
{
	__u64 ttl = svc->affinity_timeout ?: LT_AFF_DEFAULT_TIMEOUT;

	return a && now - a->last_ns < ttl * LT_NS_PER_SEC;
}

/* lt_aff_start makes endpoint idx the backend of the client and service of
 * key, used at now. */
static __always_inline int lt_aff_start(const struct lt_aff_key *key, __u32 idx, __u64 now)
{
	struct lt_endpoint *ep = lt_ep_at(idx);
	struct lt_aff v = {.ep = idx, .last_ns = now};

	if (!ep)
		return LT_STAT_BAD_INDEX;
	lt_backend_of(ep, &v.backend);
	bpf_map_update_elem(&lt_affinity, key, &v, BPF_ANY);
	return LT_OK;
}

/*
 * lt_affinity_pick picks for a consistent_hash service: the client's
 * backend while its affinity lasts (Cilium's __lb4_affinity_backend_id:
 * sticky for [last_used, last_used + timeout), the use refreshes it) and it
 * is still a candidate; else the jump hash of (client, service) in r, which
 * becomes the client's backend.
 */
static __always_inline int lt_affinity_pick(struct bpf_sock_addr *ctx, const struct lt_service *svc,
					    const struct lt_addr *fe, const struct lt_range *r, __u32 *out)
{
	struct lt_aff_key k = {.client = bpf_get_netns_cookie(ctx), .fe = *fe};
	__u64 now = bpf_ktime_get_ns();
	struct lt_aff *a = bpf_map_lookup_elem(&lt_affinity, &k);

	if (lt_aff_live(svc, a, now) && lt_aff_find(fe, a, r, out)) {
		a->ep = *out;
		a->last_ns = now;
		return LT_OK;
	}
	*out = r->lo + lt_jump(lt_aff_hash(&k), r->hi - r->lo);
	return lt_aff_start(&k, *out, now);
}

/* lt_pick_for is lt_pick, with consistent_hash by client. */
static __always_inline int lt_pick_for(struct bpf_sock_addr *ctx, const struct lt_service *svc,
				       const struct lt_addr *fe, const struct lt_range *r, __u32 *out)
{
	if (svc->policy == LT_POLICY_CONSISTENT_HASH)
		return lt_affinity_pick(ctx, svc, fe, r, out);
	return lt_pick(svc, r, out);
}

#endif /* LOCTREE_LIB_AFFINITY_H */
