//go:build ignore

/* TCP state changes: passive accepts, listeners opening and closing, and the
 * teardown of accepted connections with a request in flight.
 *
 * inet_sock_set_state mostly runs in softirq, where `current` is unrelated:
 * events are attributed by the socket's network namespace. The teardown of a
 * connection by its owner (close, or exit closing its files) runs in the
 * owner's context, which is why the close cause can be read from current.
 *
 * An accept in a pod that is not terminating costs a map update, not a
 * ring-buffer record (hold_accept): only scopes with SCOPE_DETAIL (a
 * termination, or trace) send one per connection.
 *
 * The server closing an idle keep-alive connection (its idle timeout) is
 * sent whatever the scope's flags, with how long the connection had
 * carried no data: a pool in front that reuses it later is answered with
 * a reset (correlate/keepalive.go). */
#include "drainwatch.h"
#include "inflight.h"
#include "sources.h"

/* Gives struct event a BTF entry, for bpf2go -type event. */
const struct event *unused_event __attribute__((unused));

/* Whether the node-local task that opened the connection (filled in by
 * local_source) is the kubelet: its probes say nothing about routing. */
static __always_inline bool from_probe(const struct event *e)
{
	if (!e->sender_pid)
		return false;
	struct comm_key key = {};
	__builtin_memcpy(key.c, e->sender_comm, sizeof(key.c));
	return bpf_map_lookup_elem(&probe_comms, &key) != NULL;
}

/* Count an accept in its scope's counters; the entry is absent under
 * watch_all (trace), which keeps none. */
static __always_inline struct accept_stats *count_accept(__u32 netns, bool probe)
{
	struct accept_stats *s = bpf_map_lookup_elem(&scope_accepts, &netns);
	if (!s)
		return NULL;
	s->accepts++;
	if (probe)
		s->probes++;
	return s;
}

/* An accept in a scope without detail: counted and, unless a probe made
 * it, put in the scope's history instead of the ring buffer. The value is
 * this CPU's: a plain increment claims the slot. The event is a stack
 * scratch for the addresses local_source matches, never submitted. */
static __always_inline void hold_accept(const struct sock *sk, __u32 netns, __u64 cookie)
{
	struct event e = {};
	event_sock_addrs(&e, sk);
	local_source(&e);
	bool probe = from_probe(&e);
	struct accept_stats *s = count_accept(netns, probe);
	if (!s || probe)
		return;
	__u64 now = bpf_ktime_get_ns();
	struct accept_rec *r = &s->ring[s->held & (ACCEPT_RING - 1)];
	r->ts_ns = now;
	r->cookie = cookie;
	s->last_ns = now;
	s->held++;
}

/* An accept or a listener's open or close. An accept carries the
 * node-local task that connected, when there is one (bpf/sources.h). */
static __always_inline void emit_sock(const struct sock *sk, __u8 type, __u32 netns, __u64 cookie)
{
	struct event *e = event_reserve(type);
	if (!e)
		return;
	e->netns = netns;
	e->cookie = cookie;
	event_sock_addrs(e, sk);
	if (type == EV_ACCEPT) {
		local_source(e);
		if (!watch_all)
			count_accept(netns, from_probe(e));
	} else {
		/* listen() and the close of a listener run in process context
		 * (the last fput, also at exit): the task is the container
		 * whose listener it is, which a pod of several needs. */
		event_current(e);
	}
	event_submit(e);
}

/* Remember an accepted connection of a watched scope so recv/send and the
 * teardown can tell whether a request is in flight. */
static __always_inline void track_conn(const struct sock *sk, __u64 cookie)
{
	__u64 key = (__u64)sk;
	struct conn c = { .cookie = cookie };
	if (bpf_map_update_elem(&conns, &key, &c, BPF_ANY) == 0)
		return;
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&conn_full, &zero);
	if (n)
		(*n)++;
}

/* Why the owner is tearing the connection down: dying of SIGKILL, of another
 * signal, or closing it itself (including a normal exit). */
static __always_inline __u8 close_cause(void)
{
	struct task_struct *t = current_task();
	if (!(BPF_CORE_READ(t, flags) & PF_EXITING))
		return CAUSE_CLOSE;
	int sig = BPF_CORE_READ(t, exit_code) & 0x7f;
	if (sig == SIGKILL)
		return CAUSE_SIGKILL;
	return sig ? CAUSE_SIGNAL : CAUSE_CLOSE;
}

/* Whether the application ever accepted the connection: a child still in
 * its listener's accept queue has no struct socket yet. A listener that
 * closes resets those children (inet_csk_listen_stop): the clients see
 * ECONNRESET although the kernel had completed their handshakes. */
static __always_inline bool never_accepted(const struct sock *sk)
{
	return BPF_CORE_READ(sk, sk_socket) == NULL;
}

/* The idle time user space sets (collector/kernel/compat.go): the kernel's
 * tick (1/HZ) in ns, and the shortest idle close reported, in jiffies. A
 * server that closes right after its answer (Connection: close) is not
 * an idle timeout. */
volatile const __u64 tick_ns = 4000000;
volatile const __u32 idle_close_jiffies = 25;

/* How long an established connection has carried no data, in jiffies: since
 * the last data sent (lsndtime) or received (icsk_ack.lrcvtime), the clocks
 * a server's idle timeout follows. Not tcp_mstamp: TCP keepalive probes
 * (Go's servers send them every 15 s) and their ACKs move it, and they are
 * not requests. */
static __always_inline __u32 idle_jiffies(const struct sock *sk)
{
	const struct tcp_sock *tp = (const struct tcp_sock *)sk;
	__u32 last = BPF_CORE_READ(tp, lsndtime);
	__u32 rcv = BPF_CORE_READ(tp, inet_conn.icsk_ack.lrcvtime);
	if (seq_after(rcv, last))
		last = rcv;
	return (__u32)bpf_jiffies64() - last;
}

/* An idle connection the server closes itself (ESTABLISHED -> FIN_WAIT1,
 * close or shutdown, not exiting): its idle time in ms, in seq. */
static __always_inline void idle_close(const struct sock *sk, __u64 cookie)
{
	if (BPF_CORE_READ(current_task(), flags) & PF_EXITING)
		return;
	__u32 idle = idle_jiffies(sk);
	if ((__s32)idle < (__s32)idle_close_jiffies)
		return;
	struct event *e = event_reserve(EV_IDLE_CLOSE);
	if (!e)
		return;
	e->netns = sock_netns(sk);
	e->cookie = cookie;
	e->cause = CAUSE_CLOSE;
	e->seq = (__u32)((__u64)idle * tick_ns / 1000000);
	event_sock_addrs(e, sk);
	event_current(e);
	event_submit(e);
}

/* The end of an accepted connection: reported when a request or stream was
 * in flight (conn_inflight), or when the connection dies in its listener's
 * accept queue, which the client sees as a reset whatever it had sent. */
static __always_inline void teardown(const struct sock *sk, int oldstate, int newstate)
{
	__u64 key = (__u64)sk;
	struct conn *c = bpf_map_lookup_elem(&conns, &key);
	if (!c)
		return;
	__u8 inflight = conn_inflight(c, sk, oldstate);
	__u64 cookie = c->cookie;
	bpf_map_delete_elem(&conns, &key);
	/* A reset from the peer or a timeout sets sk_err before the state
	 * change: the client gave up, the server lost nothing. A close by the
	 * owner (tcp_close, or the listener dropping its accept queue) does
	 * not. */
	if (BPF_CORE_READ(sk, sk_err))
		return;
	if (inflight == INFLIGHT_NONE && oldstate == DW_TCP_ESTABLISHED && newstate == DW_TCP_FIN_WAIT1) {
		idle_close(sk, cookie);
		return;
	}
	if (inflight == INFLIGHT_NONE && !(newstate == DW_TCP_CLOSE && never_accepted(sk)))
		return;
	struct event *e = event_reserve(EV_CONN_CLOSED_INFLIGHT);
	if (!e)
		return;
	e->netns = sock_netns(sk);
	e->cookie = cookie;
	e->cause = close_cause();
	e->inflight = inflight;
	event_sock_addrs(e, sk);
	event_current(e);
	local_source(e);
	event_submit(e);
}

SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(sock_state, const struct sock *sk, const int oldstate, const int newstate)
{
	/* Decide from the states (free: they are arguments) before reading the
	 * socket: this runs on every state change of every socket of the node. */
	if (oldstate == DW_TCP_ESTABLISHED || oldstate == DW_TCP_CLOSE_WAIT) {
		/* Only TCP sockets are ever in conns: no protocol check needed. */
		if (newstate == DW_TCP_FIN_WAIT1 || newstate == DW_TCP_LAST_ACK ||
		    newstate == DW_TCP_CLOSE)
			teardown(sk, oldstate, newstate);
		return 0;
	}
	if (oldstate == DW_TCP_CLOSE && newstate == DW_TCP_SYN_SENT) {
		local_connect(sk);
		return 0;
	}
	__u8 type = 0;
	if (oldstate == DW_TCP_SYN_RECV && newstate == DW_TCP_ESTABLISHED)
		type = EV_ACCEPT;
	else if (newstate == DW_TCP_LISTEN)
		type = EV_LISTEN_OPEN;
	/* Not any LISTEN exit: a passive child is cloned from its listener
	 * and traced as LISTEN -> SYN_RECV. */
	else if (oldstate == DW_TCP_LISTEN && newstate == DW_TCP_CLOSE)
		type = EV_LISTEN_CLOSE;
	if (!type || BPF_CORE_READ(sk, sk_protocol) != IPPROTO_TCP)
		return 0;
	__u32 netns = sock_netns(sk);
	__u8 flags = netns_flags(netns);
	if (!flags)
		return 0;
	__u64 cookie = sock_identity(sk);
	if (type == EV_ACCEPT) {
		track_conn(sk, cookie);
		/* The flags are read once: each accept is either held or
		 * sent, never both. User space, after setting SCOPE_DETAIL,
		 * waits for an RCU grace period (this program runs under
		 * rcu_read_lock) before it reads the history: every program
		 * that read the old flags has then finished its update. */
		if (!(flags & SCOPE_DETAIL)) {
			hold_accept(sk, netns, cookie);
			return 0;
		}
	}
	emit_sock(sk, type, netns, cookie);
	return 0;
}
