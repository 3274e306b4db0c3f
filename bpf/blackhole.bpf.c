//go:build ignore

/* Blackholed connection attempts: a SYN for the address of a terminating
 * pod that the node's kernel dropped before it reached the pod, because the
 * pod's network is gone (its veth left the bridge, its route was removed)
 * while routing still sends there. The client sees a connect timeout or "no
 * route to host"; no socket of the pod ever sees the SYN.
 *
 * kfree_skb fires for every packet the node drops, so the program keeps
 * what it reports to the few drops that can be one, before anything leaves
 * the kernel: a drop reason of the neighbour, routing or device layers (a
 * compare), then an IPv4/IPv6 TCP segment that is a bare SYN (two reads of
 * the headers), then its destination listed in local_dsts with
 * DST_BLACKHOLE, which user space sets while the address's pod terminates
 * (one lookup). Drops in the pod's own namespace and copies of a SYN that
 * also reached the pod (a bridge floods a frame for an unknown MAC to every
 * port, and the other pods drop it as OTHERHOST) are told apart in user
 * space, which sees the pod's accepts and refusals.
 *
 * IPv6's neighbour discovery frees the packets queued for a neighbour that
 * never answered without a reason (ndisc_error_report's kfree_skb, from
 * neigh_invalidate: NOT_SPECIFIED, where IPv4's arp_error_report says
 * NEIGH_FAILED; checked on 6.18 with SYNs to an unresolved address of each
 * family), so for an IPv6 segment an unspecified drop qualifies too; the
 * SYN and destination filters that follow are the same.
 *
 * Needs kfree_skb's reason argument (Linux >= 5.17); the loader reports the
 * probe unavailable below that. */
#include "drainwatch.h"
#include "sources.h"

#define TCP_FLAG_RST 0x04
#define TCP_FLAG_SYN 0x02
#define TCP_FLAG_ACK 0x10

/* The value of a drop reason on the running kernel, or -1 (no reason
 * matches it) where the kernel does not have it. The reasons are named
 * through a flavor of the enum (CO-RE matches names without the ___dw
 * suffix), so that a reason the build's vmlinux.h lacks (QUEUE_PURGE is
 * newer than the arm64 header's kernel) still compiles. */
enum skb_drop_reason___dw {
	SKB_DROP_REASON_NOT_SPECIFIED___dw,
	SKB_DROP_REASON_NEIGH_FAILED___dw,
	SKB_DROP_REASON_NEIGH_QUEUEFULL___dw,
	SKB_DROP_REASON_NEIGH_DEAD___dw,
	SKB_DROP_REASON_NEIGH_CREATEFAIL___dw,
	SKB_DROP_REASON_QUEUE_PURGE___dw,
	SKB_DROP_REASON_OTHERHOST___dw,
	SKB_DROP_REASON_IP_INNOROUTES___dw,
	SKB_DROP_REASON_IP_OUTNOROUTES___dw,
	SKB_DROP_REASON_IP_INADDRERRORS___dw,
	SKB_DROP_REASON_QDISC_DROP___dw,
	SKB_DROP_REASON_DEV_READY___dw,
};

#define DROP_REASON(name)                                                                 \
	(bpf_core_enum_value_exists(enum skb_drop_reason___dw, SKB_DROP_REASON_##name##___dw) ? \
		 (int)bpf_core_enum_value(enum skb_drop_reason___dw, SKB_DROP_REASON_##name##___dw) : -1)

/* The reasons that say the packet could not be delivered to an address,
 * not that an endpoint refused it: the neighbour never answered (or its
 * entry went away with the packet queued), no route, a frame for another
 * host's MAC (a flooded copy), a device that is down or gone. */
static __always_inline bool undeliverable(int reason)
{
	return reason == DROP_REASON(NEIGH_FAILED) || reason == DROP_REASON(NEIGH_QUEUEFULL) ||
	       reason == DROP_REASON(NEIGH_DEAD) || reason == DROP_REASON(NEIGH_CREATEFAIL) ||
	       reason == DROP_REASON(QUEUE_PURGE) || reason == DROP_REASON(OTHERHOST) ||
	       reason == DROP_REASON(IP_INNOROUTES) || reason == DROP_REASON(IP_OUTNOROUTES) ||
	       reason == DROP_REASON(IP_INADDRERRORS) || reason == DROP_REASON(QDISC_DROP) ||
	       reason == DROP_REASON(DEV_READY);
}

SEC("tp_btf/kfree_skb")
int BPF_PROG(kfree_skb_blackhole, struct sk_buff *skb, void *location, int reason)
{
	bool named = undeliverable(reason);
	if (!named && reason != DROP_REASON(NOT_SPECIFIED))
		return 0;
	/* The network header is set on every path that can drop for these
	 * reasons (receive, forward, output); the transport header is not
	 * (a received frame has it at the network header until IP parses it),
	 * so the TCP header is found from the IP header. */
	unsigned char *head = BPF_CORE_READ(skb, head);
	__u16 nh = BPF_CORE_READ(skb, network_header);
	__u8 ip[40];
	if (bpf_probe_read_kernel(ip, sizeof(ip), head + nh))
		return 0;
	struct addr_key dst = {};
	__u32 th;
	__u8 family;
	if (named && (ip[0] >> 4) == 4 && ip[9] == IPPROTO_TCP) { /* unspecified: IPv6 only */
		family = AF_INET;
		th = (ip[0] & 0xf) * 4;
		__builtin_memcpy(dst.a, &ip[16], 4);
	} else if ((ip[0] >> 4) == 6 && ip[6] == IPPROTO_TCP) {
		family = AF_INET6;
		th = 40;
		__builtin_memcpy(dst.a, &ip[24], 16);
		unmap_v4(dst.a);
	} else {
		return 0;
	}
	__u8 tcp[14];
	if (th < 20 || bpf_probe_read_kernel(tcp, sizeof(tcp), head + nh + (th & 0x3f)))
		return 0;
	if ((tcp[13] & (TCP_FLAG_SYN | TCP_FLAG_ACK | TCP_FLAG_RST)) != TCP_FLAG_SYN)
		return 0;
	__u8 *flags = bpf_map_lookup_elem(&local_dsts, &dst);
	if (!watch_all && (!flags || !(*flags & DST_BLACKHOLE)))
		return 0;
	struct event *e = event_reserve(EV_BLACKHOLED);
	if (!e)
		return 0;
	e->family = family;
	if (family == AF_INET) {
		__builtin_memcpy(e->raddr, &ip[12], 4);
		__builtin_memcpy(e->laddr, &ip[16], 4);
	} else {
		__builtin_memcpy(e->raddr, &ip[8], 16);
		__builtin_memcpy(e->laddr, &ip[24], 16);
	}
	e->rport = (tcp[0] << 8) | tcp[1];
	e->lport = (tcp[2] << 8) | tcp[3];
	/* Retransmissions of one attempt carry its sequence number. */
	e->seq = ((__u32)tcp[4] << 24) | ((__u32)tcp[5] << 16) | ((__u32)tcp[6] << 8) | tcp[7];
	e->reason = reason;
	struct net_device *dev = BPF_CORE_READ(skb, dev);
	if (dev)
		e->netns = BPF_CORE_READ(dev, nd_net.net, ns.inum);
	local_source(e);
	event_submit(e);
	return 0;
}
