/* Node-local sources of connections to the node's pods. The kubelet's
 * probes (and a node-local proxy, a scraper) connect from a process of this
 * node, whose task the kernel sees when it connects; the pod's side of the
 * same connection (an accept, or the RST refusing the SYN) runs in softirq
 * and sees only addresses. At connect, in the connecting task's context,
 * the socket is remembered under (source address, pod address); on the
 * pod's side the SYN's source port picks it out, because by then the
 * connecting socket has its port. The pod's port is not part of the key: the
 * pod's own iptables may have redirected the connection to another port
 * than the one dialed (a mesh's REDIRECT to its proxy, 8080 to 15006), and
 * the kubelet's probe through it is still the kubelet's. Only connections to the addresses user
 * space lists in local_dsts (the watched pods' IPs) are remembered, so any
 * other connect on the node costs one hash lookup. */
#pragma once

#include "drainwatch.h"

/* An IPv4-mapped IPv6 address (::ffff:a.b.c.d) as the IPv4 layout. */
static __always_inline void unmap_v4(__u8 a[16])
{
	__u64 lo = 0;
	__builtin_memcpy(&lo, a, 8);
	if (lo || a[8] || a[9] || a[10] != 0xff || a[11] != 0xff)
		return;
	__builtin_memcpy(a, &a[12], 4);
	__builtin_memset(&a[4], 0, 12);
}

/* A connecting socket entering SYN_SENT, in the connecting task's context:
 * remembered when it connects to a watched pod's address. Its source port
 * is not chosen yet (inet_hash_connect runs after this state change). */
static __always_inline void local_connect(const struct sock *sk)
{
	struct syn_key key = {};
	__u16 family = BPF_CORE_READ(sk, __sk_common.skc_family);
	if (family == AF_INET6) {
		BPF_CORE_READ_INTO(&key.saddr, sk, __sk_common.skc_v6_rcv_saddr.in6_u.u6_addr8);
		BPF_CORE_READ_INTO(&key.daddr, sk, __sk_common.skc_v6_daddr.in6_u.u6_addr8);
		unmap_v4(key.saddr);
		unmap_v4(key.daddr);
	} else if (family == AF_INET) {
		BPF_CORE_READ_INTO((__u32 *)key.saddr, sk, __sk_common.skc_rcv_saddr);
		BPF_CORE_READ_INTO((__u32 *)key.daddr, sk, __sk_common.skc_daddr);
	} else {
		return;
	}
	struct addr_key dst = {};
	__builtin_memcpy(dst.a, key.daddr, 16);
	if (!bpf_map_lookup_elem(&local_dsts, &dst))
		return;
	struct syn_slots *v = bpf_map_lookup_elem(&local_syns, &key);
	if (!v) {
		struct syn_slots zero = {};
		if (bpf_map_update_elem(&local_syns, &key, &zero, BPF_NOEXIST) == 0)
			lru_inserted(LRU_LOCAL_SYNS);
		v = bpf_map_lookup_elem(&local_syns, &key);
		if (!v)
			return;
	}
	struct syn_slot *s = &v->s[v->next & (SYN_SLOTS - 1)];
	v->next++;
	s->sk = (__u64)sk;
	s->cookie = sock_cookie(sk);
	s->cgroup = bpf_get_current_cgroup_id();
	s->pid = bpf_get_current_pid_tgid() >> 32;
	bpf_get_current_comm(s->comm, sizeof(s->comm));
}

/* Fill the sender fields of a pod-side event (accept, refused, reset:
 * local = the pod, remote = the client) with the node-local task that
 * opened the connection, when one did. */
static __always_inline void local_source(struct event *e)
{
	struct syn_key key = {};
	__builtin_memcpy(key.saddr, e->raddr, 16);
	__builtin_memcpy(key.daddr, e->laddr, 16);
	unmap_v4(key.saddr);
	unmap_v4(key.daddr);
	struct syn_slots *v = bpf_map_lookup_elem(&local_syns, &key);
	if (!v)
		return;
	for (int i = 0; i < SYN_SLOTS; i++) {
		struct syn_slot *s = &v->s[i];
		if (!s->sk)
			continue;
		/* A freed socket's memory is soon another socket's: the cookie
		 * (never reused) says whether it is still the one that connected. */
		const struct sock *sk = (const struct sock *)s->sk;
		if (BPF_CORE_READ(sk, __sk_common.skc_cookie.counter) != s->cookie)
			continue;
		const struct inet_sock *inet = (const struct inet_sock *)s->sk;
		if (bpf_ntohs(BPF_CORE_READ(inet, inet_sport)) != e->rport)
			continue;
		e->sender_pid = s->pid;
		e->sender_cgroup = s->cgroup;
		__builtin_memcpy(e->sender_comm, s->comm, sizeof(e->sender_comm));
		return;
	}
}
