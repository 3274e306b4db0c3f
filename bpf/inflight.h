/* Whether an accepted connection has a request or stream in flight when it
 * is torn down: the one definition every kernel shares (README, "Counts").
 * sock_state.bpf.c asks conn_inflight() at teardown; inflight.bpf.c keeps
 * the per-connection state it reads. */
#pragma once

#include "drainwatch.h"
#include "h2.h"

/* Bytes received but not yet read by the server. rcv_nxt counts a received
 * FIN as one sequence number, which copied_seq only passes once the server
 * has read EOF: in CLOSE_WAIT a difference of 1 is that FIN, not data. */
static __always_inline bool unread_bytes(const struct sock *sk, int oldstate)
{
	const struct tcp_sock *tp = (const struct tcp_sock *)sk;
	__u32 diff = BPF_CORE_READ(tp, rcv_nxt) - BPF_CORE_READ(tp, copied_seq);
	return oldstate == DW_TCP_CLOSE_WAIT ? diff > 1 : diff > 0;
}

/* The in-flight kind of c at teardown from oldstate, INFLIGHT_NONE when
 * nothing was in flight. */
static __always_inline __u8 conn_inflight(const struct conn *c, const struct sock *sk, int oldstate)
{
	/* HTTP/2 (bpf/h2.h): in flight exactly when a client stream is open.
	 * Unread bytes do not count: they may be PINGs or WINDOW_UPDATEs. */
	if (c->proto == PROTO_H2)
		return h2_any_open(c) ? INFLIGHT_STREAM : INFLIGHT_NONE;
	if (c->unanswered)
		return INFLIGHT_REQUEST;
	if (unread_bytes(sk, oldstate))
		return INFLIGHT_UNREAD;
	return INFLIGHT_NONE;
}
