//go:build ignore

/* RSTs: `refused` when no socket exists for a SYN (the connection attempt a
 * client sees as ECONNREFUSED), `reset` for any other RST in a watched
 * network namespace.
 *
 * tcp_send_reset with its reason argument sees every RST (Linux >= 6.10),
 * alone. Older kernels trace tcp_send_reset only for RSTs of full sockets,
 * without a reason (tcp_send_reset_sock), and nothing for RSTs answering a
 * segment no socket wants; those come from the segment's free after the RST:
 * kfree_skb with drop reason NO_SOCKET (Linux >= 5.17), or, before drop
 * reasons, kfree_skb called from inside tcp_v4_rcv/tcp_v6_rcv on a bare SYN
 * (rcv_ranges, from /proc/kallsyms; refusals only). The loader keeps one
 * no-socket source and, below 6.10, tcp_send_reset_sock. RSTs without a socket run
 * in softirq and attribute by the receiving device's network namespace; RSTs
 * a socket sends attribute by the socket's, and carry the sending process
 * when its owner sent them (see sent_by_owner). */
#include "drainwatch.h"
#include "sources.h"

#define TCP_FLAG_RST 0x04
#define TCP_FLAG_SYN 0x02
#define TCP_FLAG_ACK 0x10
/* SK_RST_REASON_NO_SOCKET (include/net/rstreason.h, Linux >= 6.10). A
 * constant, not a CO-RE enum read: the fallback shares this code on kernels
 * without that enum, and reports the same number so both sources read alike. */
#define RST_REASON_NO_SOCKET 1

/* Parse the IP and TCP headers of a received packet into the event, from
 * the server's point of view (local = destination). Returns the TCP flags,
 * or -1 when the packet is not TCP over IPv4/IPv6 without extension headers. */
static __always_inline int parse_rx(const struct sk_buff *skb, struct event *e)
{
	unsigned char *head = BPF_CORE_READ(skb, head);
	__u16 nh = BPF_CORE_READ(skb, network_header);
	__u16 th = BPF_CORE_READ(skb, transport_header);
	__u8 ip[40];
	__u8 tcp[14];
	if (bpf_probe_read_kernel(ip, sizeof(ip), head + nh) ||
	    bpf_probe_read_kernel(tcp, sizeof(tcp), head + th))
		return -1;
	if ((ip[0] >> 4) == 4 && ip[9] == IPPROTO_TCP) {
		e->family = AF_INET;
		__builtin_memcpy(e->raddr, &ip[12], 4);
		__builtin_memcpy(e->laddr, &ip[16], 4);
	} else if ((ip[0] >> 4) == 6 && ip[6] == IPPROTO_TCP) {
		e->family = AF_INET6;
		__builtin_memcpy(e->raddr, &ip[8], 16);
		__builtin_memcpy(e->laddr, &ip[24], 16);
	} else {
		return -1;
	}
	e->rport = (tcp[0] << 8) | tcp[1];
	e->lport = (tcp[2] << 8) | tcp[3];
	/* A SYN retransmitted after its RST was lost carries the same
	 * sequence number: correlate counts the attempt once. */
	e->seq = ((__u32)tcp[4] << 24) | ((__u32)tcp[5] << 16) | ((__u32)tcp[6] << 8) | tcp[7];
	return tcp[13];
}

static __always_inline __u32 skb_netns(const struct sk_buff *skb)
{
	return BPF_CORE_READ(skb, dev, nd_net.net, ns.inum);
}

/* A RST answering a packet for which no socket exists: refused when that
 * packet was a bare SYN and the reason is NO_SOCKET (a connection attempt
 * to a closed port), reset with the reason otherwise (late segments of a
 * connection that is gone). syn_only drops the latter (the fallback sees
 * drops, not RSTs). */
static __always_inline void no_socket(const struct sk_buff *skb, __u32 reason, bool syn_only)
{
	__u32 netns = skb_netns(skb);
	if (!netns_watched(netns))
		return;
	struct event *e = event_reserve(EV_REFUSED);
	if (!e)
		return;
	int flags = parse_rx(skb, e);
	bool syn = flags >= 0 && (flags & (TCP_FLAG_SYN | TCP_FLAG_ACK | TCP_FLAG_RST)) == TCP_FLAG_SYN;
	if (flags < 0 || (syn_only && !syn) || (flags & TCP_FLAG_RST)) {
		bpf_ringbuf_discard(e, 0);
		return;
	}
	e->type = syn && reason == RST_REASON_NO_SOCKET ? EV_REFUSED : EV_RESET;
	e->netns = netns;
	e->reason = reason;
	local_source(e);
	event_submit(e);
}

/* Whether a RST sent by sk runs in the context of the process that owns the
 * socket, so that `current` is the sender: the close that aborts a
 * connection with unread data, the exit that closes the process's files, a
 * backlog replayed by release_sock. All of them hold the socket lock
 * (sk_lock.owned), and softirq never sends on an owned socket: it queues to
 * the backlog instead, under the same spinlock that lock_sock takes, so the
 * flag cannot change under a softirq sender. Listeners are excluded (their
 * RSTs answer packets locklessly, in softirq, even while a process holds
 * the lock), and so are timewait and request sockets, which have no lock. */
static __always_inline bool sent_by_owner(const struct sock *sk)
{
	__u8 state = BPF_CORE_READ(sk, __sk_common.skc_state);
	if (state == DW_TCP_LISTEN || state == DW_TCP_TIME_WAIT || state == DW_TCP_NEW_SYN_RECV)
		return false;
	return BPF_CORE_READ(sk, sk_lock.owned) != 0;
}

/* A RST sent by a socket. In its owner's context (abort on close, exit) the
 * event carries the sending process, which correlate needs to count
 * connections reset at exit; in softirq (a segment for a closed or orphaned
 * connection, keepalive and retransmit timeouts) `current` is whatever task
 * the interrupt hit, so pid, tid and comm stay 0. */
static __always_inline void sock_reset(const struct sock *sk, __u32 reason)
{
	__u32 netns = sock_netns(sk);
	if (!netns_watched(netns))
		return;
	struct event *e = event_reserve(EV_RESET);
	if (!e)
		return;
	e->netns = netns;
	e->reason = reason;
	/* Never 0 where the helper exists (0 would read as no socket); the
	 * loader leaves this program out where it does not (Linux < 5.12). */
	e->cookie = sock_cookie(sk);
	event_sock_addrs(e, sk);
	if (sent_by_owner(sk))
		event_current(e);
	event_submit(e);
}

SEC("tp_btf/tcp_send_reset")
int BPF_PROG(tcp_send_reset, const struct sock *sk, const struct sk_buff *skb, int reason)
{
	if (sk)
		sock_reset(sk, reason);
	else if (skb)
		no_socket(skb, reason, false);
	return 0;
}

/* SK_RST_REASON_NOT_SPECIFIED: the kernel names no reason below 6.10. */
#define RST_REASON_UNKNOWN 0

/* RSTs of full sockets on kernels whose tcp_send_reset has no reason
 * argument (Linux < 6.10), which fire it only for those (`if (sk &&
 * sk_fullsock(sk))` in tcp_v4_send_reset/tcp_v6_send_reset, and
 * tcp_send_active_reset). It reads two arguments, so it also loads on later
 * kernels, where the same test keeps it to what older ones report: RSTs
 * without a socket come from a kfree_skb program, and those of timewait and
 * request sockets (which name no process, so no count uses them) are not
 * seen. */
SEC("tp_btf/tcp_send_reset")
int BPF_PROG(tcp_send_reset_sock, const struct sock *sk, const struct sk_buff *skb)
{
	if (!sk)
		return 0;
	__u8 state = BPF_CORE_READ(sk, __sk_common.skc_state);
	if (state == DW_TCP_TIME_WAIT || state == DW_TCP_NEW_SYN_RECV)
		return 0;
	sock_reset(sk, RST_REASON_UNKNOWN);
	return 0;
}

/* RSTs without a socket on kernels whose tcp_send_reset has no reason
 * (Linux 5.17 to 6.9): tcp_v4_rcv/tcp_v6_rcv free a segment no socket
 * wants with NO_SOCKET after tcp_v4_send_reset(NULL, skb) answered it, or
 * after it did not: the segment was a RST (no_socket skips those), failed
 * its checksum (reason TCP_CSUM instead) or an IPsec policy (rare, counted).
 * A bare SYN is refused, anything else reset. */
SEC("tp_btf/kfree_skb")
int BPF_PROG(kfree_skb_no_socket, struct sk_buff *skb, void *location, int reason)
{
	if (reason != bpf_core_enum_value(enum skb_drop_reason, SKB_DROP_REASON_NO_SOCKET))
		return 0;
	no_socket(skb, RST_REASON_NO_SOCKET, false);
	return 0;
}

/* Code ranges [start, end) of tcp_v4_rcv and tcp_v6_rcv (and their .cold
 * parts), set by the loader from /proc/kallsyms for kfree_skb_rcv_syn. */
#define RCV_RANGES 4
volatile const __u64 rcv_ranges[RCV_RANGES][2] = {};

static __always_inline bool in_tcp_rcv(__u64 ip)
{
	for (int i = 0; i < RCV_RANGES; i++)
		if (ip >= rcv_ranges[i][0] && ip < rcv_ranges[i][1])
			return true;
	return false;
}

/* Fallback for kernels without drop reasons (Linux < 5.17): tcp_v4_rcv and
 * tcp_v6_rcv free a packet themselves only on their discard path, which a
 * bare SYN reaches when no socket exists (after the RST), or when it fails
 * its checksum or a policy check, or meets a TIME_WAIT socket whose
 * listener is gone; a SYN a listener handles is freed elsewhere
 * (tcp_v4_do_rcv, consume_skb). The last three are rare and count here as
 * refused too. Other segments it frees are no measure of RSTs (a timewait
 * socket's ACKs end there too), so RSTs without a socket are not reported. */
SEC("tp_btf/kfree_skb")
int BPF_PROG(kfree_skb_rcv_syn, struct sk_buff *skb, void *location)
{
	if (!in_tcp_rcv((__u64)location))
		return 0;
	no_socket(skb, RST_REASON_NO_SOCKET, true);
	return 0;
}
