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
	if (lt_keep(ctx, v6, old, &fe, &r))
		return SK_PASS; /* not a new pick: not counted by priority */
	ret = lt_redirect_to(ctx, v6, proto, cookie, old, &fe, idx, policy);
	if (ret == SK_PASS)
		lt_count_prio(prio, deg);
	return ret;
}

#endif /* LOCTREE_PRIORITY_SOCK_H */
