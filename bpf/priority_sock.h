/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * lt_redirect_loads: lt_redirect for a service with a priority load
 * (priority.h). Its own subprogram: lt_redirect's frame and the priority
 * computation's do not fit the 512-byte BPF stack together, so the
 * service's copy, the source labels and the loads live in a scratch slot.
 * Included by loctree.c after the socket helpers it uses.
 */
#ifndef LOCTREE_PRIORITY_SOCK_H
#define LOCTREE_PRIORITY_SOCK_H

#include "priority.h"

/*
 * lt_redirect_loads handles one connect or sendmsg to a service with a
 * priority load as lt_redirect does any other; it returns -1, touching
 * nothing, when the address is not such a service.
 */
static __noinline int lt_redirect_loads(struct bpf_sock_addr *ctx, int v6, __u32 proto)
{
	struct lt_service *found;
	struct lt_addr fe, b;
	struct lt_endpoint *ep;
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
	l = lt_loads_take();
	if (!l)
		return lt_refuse(LT_STAT_SCRATCH_BUSY);
	__builtin_memcpy(&l->svc, found, sizeof(l->svc)); /* one copy, as lt_redirect's */
	__builtin_memset(&l->aff, 0, sizeof(l->aff));
	if (l->svc.policy == LT_POLICY_CONSISTENT_HASH) {
		l->aff.client = bpf_get_netns_cookie(ctx);
		l->aff.fe = fe;
	}
	ret = lt_select_in(l, lt_source(&l->svc, l->labels), &r, &idx);
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
	if (old && lt_kept(old, &fe, &r)) {
		lt_set_addr(ctx, v6, &old->backend);
		lt_count(LT_STAT_REDIRECT);
		return SK_PASS;
	}
	ep = lt_ep_at(idx);
	if (!ep)
		return lt_refuse(LT_STAT_BAD_INDEX);
	if (ep->family != fe.family)
		return lt_refuse(LT_STAT_BAD_FAMILY);
	lt_backend_of(ep, &b);
	lt_set_addr(ctx, v6, &b);
	lt_remember(cookie, old, &fe, &b, idx, lt_counts(policy));
	if (proto == IPPROTO_UDP)
		lt_rev_add(cookie, &b, &fe);
	lt_count(LT_STAT_REDIRECT);
	lt_count_prio(prio, deg);
	return SK_PASS;
}

#endif /* LOCTREE_PRIORITY_SOCK_H */
