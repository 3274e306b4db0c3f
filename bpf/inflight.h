/* Whether an accepted connection has a request or stream in flight when it
 * is torn down: the one definition every kernel shares (README, "Counts").
 * sock_state.bpf.c asks conn_inflight() at teardown.
 *
 * Every connection is judged from its socket's own state (CO-RE reads of
 * tcp_sock, on every kernel from 5.10), except an HTTP/2 connection the
 * message probes (inflight.bpf.c, bpf/h2.h) followed from its preface on:
 * that one is in flight exactly when a client stream is open.
 *
 * The message probes are attached on demand (collector/kernel
 * MessageProbes). An HTTP/2 connection opened while they were detached, or
 * one they lost, is judged by the socket rule below, which sees bytes, not
 * streams: an idle HTTP/2 connection whose last segment from the client
 * carried data the server had not answered (its SETTINGS ACK, a
 * WINDOW_UPDATE, a PING the server has not answered yet) counts as in
 * flight, and one whose open stream was last answered by the server
 * (a server stream, a long poll after its headers) does not. */
#pragma once

#include "drainwatch.h"
#include "h2.h"

static __always_inline bool seq_after(__u32 a, __u32 b) { return (__s32)(a - b) > 0; }

/* The socket rule: the peer sent bytes after the last bytes the server
 * sent, or unread bytes sit in the receive queue. fin is 1 when the peer's
 * FIN was received (CLOSE_WAIT): rcv_nxt counts it as one sequence number.
 *
 * - Unread: rcv_nxt - copied_seq, minus the FIN, which copied_seq only
 *   passes once the server has read EOF.
 * - Data of the server the peer has not acknowledged (write_seq !=
 *   snd_una): the server spoke last.
 * - Otherwise snd_wl1 is the sequence number of the last segment that
 *   advanced the acknowledgment or the window (tcp_ack; tcp_init_wl at the
 *   handshake). A request carrying the ACK of the previous answer, or the
 *   first request after the handshake, leaves it at the request's first
 *   byte: before rcv_nxt. The fast path of tcp_rcv_established does not
 *   call tcp_ack for later segments that acknowledge nothing new, and the
 *   slow path moves it to their start: still before rcv_nxt. The pure ACK
 *   of an answer, or a window update, moves it to rcv_nxt: idle.
 * - A FIN in a segment of its own moves snd_wl1 to the FIN's sequence
 *   number whether a request came before it or not; then the last data
 *   received (icsk_ack.lrcvtime) must be later than the last data sent
 *   (lsndtime), in jiffies, or data received while the server never sent
 *   any (bytes_received, bytes_acked): a later request followed by a lone
 *   FIN, both within the jiffy the previous answer was sent in, counts as
 *   idle. */
static __always_inline __u8 socket_inflight(const struct sock *sk, int oldstate)
{
	const struct tcp_sock *tp = (const struct tcp_sock *)sk;
	__u32 fin = oldstate == DW_TCP_CLOSE_WAIT;
	__u32 rcv_nxt = BPF_CORE_READ(tp, rcv_nxt);
	__u32 unread = rcv_nxt - BPF_CORE_READ(tp, copied_seq);
	if (unread > fin)
		return INFLIGHT_UNREAD;
	if (BPF_CORE_READ(tp, write_seq) != BPF_CORE_READ(tp, snd_una))
		return INFLIGHT_NONE;
	__u32 data_end = rcv_nxt - fin;
	if (seq_after(data_end, BPF_CORE_READ(tp, snd_wl1)))
		return INFLIGHT_REQUEST;
	if (!fin)
		return INFLIGHT_NONE;
	/* Data received and none ever sent: the first request is unanswered
	 * (lrcvtime and lsndtime both start at the handshake's jiffy).
	 * bytes_received counts the FIN as a byte. */
	if (BPF_CORE_READ(tp, bytes_received) > fin && !BPF_CORE_READ(tp, bytes_acked))
		return INFLIGHT_REQUEST;
	if (seq_after(BPF_CORE_READ(tp, inet_conn.icsk_ack.lrcvtime), BPF_CORE_READ(tp, lsndtime)))
		return INFLIGHT_REQUEST;
	return INFLIGHT_NONE;
}

/* The in-flight kind of c at teardown from oldstate, INFLIGHT_NONE when
 * nothing was in flight. */
static __always_inline __u8 conn_inflight(const struct conn *c, const struct sock *sk, int oldstate)
{
	/* HTTP/2 followed since its preface (bpf/h2.h): in flight exactly
	 * when a client stream is open. Unread bytes do not count: they may
	 * be PINGs or WINDOW_UPDATEs. */
	if (c->proto == PROTO_H2)
		return h2_any_open(c) ? INFLIGHT_STREAM : INFLIGHT_NONE;
	return socket_inflight(sk, oldstate);
}
