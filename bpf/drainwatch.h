/* Shared by every drainwatch BPF object: the event record Go decodes, the
 * maps user space shares between objects (scopes, ring buffer, lost counter,
 * in-flight bookkeeping) and the scope checks.
 *
 * Each *.bpf.c file is one concern and one object. The maps are defined here
 * in each of them; the Go loader creates them once and hands the same maps
 * to every object (MapReplacements), so they behave as one program. */
#pragma once

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_endian.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define AF_INET 2
#define AF_INET6 10
#define PF_EXITING 0x00000004
#define SIGKILL 9
#define SHUTDOWN_MASK 3

/* TCP states (include/net/tcp_states.h): stable kernel ABI. */
enum {
	DW_TCP_ESTABLISHED = 1,
	DW_TCP_SYN_SENT = 2,
	DW_TCP_SYN_RECV = 3,
	DW_TCP_FIN_WAIT1 = 4,
	DW_TCP_TIME_WAIT = 6,
	DW_TCP_CLOSE = 7,
	DW_TCP_CLOSE_WAIT = 8,
	DW_TCP_LAST_ACK = 9,
	DW_TCP_LISTEN = 10,
	DW_TCP_NEW_SYN_RECV = 12,
};

/* Event types: same numbers as collector.EventType. */
enum event_type {
	EV_ACCEPT = 1,
	EV_LISTEN_OPEN = 2,
	EV_LISTEN_CLOSE = 3,
	EV_REFUSED = 4,
	EV_RESET = 5,
	EV_SIGNAL = 6,
	EV_EXIT = 7,
	EV_CONN_CLOSED_INFLIGHT = 8,
	EV_BLACKHOLED = 9,
	EV_IDLE_CLOSE = 10,
};

/* What made a connection in flight: same numbers as collector.InflightKind. */
enum inflight_kind {
	INFLIGHT_NONE = 0,
	INFLIGHT_REQUEST = 1,
	INFLIGHT_UNREAD = 2,
	INFLIGHT_STREAM = 3,
};

/* Close causes: same numbers as collector.CloseCause. */
enum close_cause {
	CAUSE_SIGKILL = 1,
	CAUSE_SIGNAL = 2,
	CAUSE_CLOSE = 3,
};

/* One kernel observation. Fields are ordered by size so the struct has no
 * implicit padding; Go gets the same layout from bpf2go (-type event). */
struct event {
	__u64 ts_ns;       /* bpf_ktime_get_ns: CLOCK_MONOTONIC */
	__u64 cgroup_id;
	__u64 cookie;      /* socket cookie, 0 when no socket exists */
	__u64 sender_cgroup; /* signal sender's, or the node-local connecting task's */
	__u32 netns;
	__u32 pid;         /* tgid */
	__u32 tid;
	__u32 reason;      /* RST reason */
	__u32 signal;
	__u32 sender_pid;
	__s32 exit_status; /* raw wait status (task->exit_code) */
	__u32 signal_result;
	__u8 laddr[16];    /* network byte order; IPv4 in the first 4 bytes */
	__u8 raddr[16];
	__u16 lport;       /* host byte order */
	__u16 rport;
	__u16 family;
	__u8 type;
	__u8 cause;
	__u8 target_init;
	__u8 inflight;     /* enum inflight_kind, for EV_CONN_CLOSED_INFLIGHT */
	__u8 pad[2];
	__u32 seq;         /* refused, blackholed: the SYN's sequence number (host
	                    * byte order); idle_close: the idle time in ms */
	char comm[16];
	char sender_comm[16];
};

/* A watched scope: a network namespace inode or a cgroup v2 id. */
enum scope_kind {
	SCOPE_NETNS = 1,
	SCOPE_CGROUP = 2,
};

struct scope_key {
	__u64 id;
	__u32 kind;
	__u32 pad;
};

/* Per accepted connection in a watched scope: its cookie, and the HTTP/2
 * streams bpf/inflight.h needs at teardown when the message probes
 * followed the connection (the socket rule needs nothing here). */
struct conn {
	__u64 cookie;
	__u8 proto;        /* enum conn_proto (bpf/h2.h): HTTP/2 or the socket rule */
	__u8 preface_got;  /* bytes of the HTTP/2 client preface read so far */
	__u8 pad[2];
	__u32 max_sid;     /* highest client stream id opened */
	/* HTTP/2 framing of one direction: the reader's (rx, written only by
	 * reads) and the server's (tx, written only by sends). */
	struct h2_dir {
		__u32 left;    /* payload bytes of the current frame still to come */
		__u8 got;      /* bytes of the next frame header seen so far */
		__u8 hdr[9];   /* that header */
		__u8 pad[2];
	} rx, tx;
	/* Ids of the open client streams, 0 for a free slot: a read opens a
	 * slot, a send or a read closes it, never both on one slot at once. */
	__u32 streams[16];
};

/* A watched scope's value: flags. A netns without SCOPE_DETAIL (a pod that
 * is not terminating) keeps its accepts in scope_accepts instead of sending
 * a record per connection through the ring buffer. */
enum scope_flags {
	SCOPE_WATCHED = 1,
	SCOPE_DETAIL = 2, /* a record per accept: a termination, or trace */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct scope_key);
	__type(value, __u8);
} scopes SEC(".maps");

/* Per watched netns and per CPU: the accepts that sent no record. The
 * counters count every accept of the scope; the history (held, last_ns,
 * ring) only those without SCOPE_DETAIL, so that when user space sets it
 * (a termination begins) the history stops moving and, read once after a
 * grace period, holds exactly the accepts the ring buffer did not carry.
 * Per CPU: no shared cache line between CPUs accepting for the same pod,
 * and the ring slot is claimed without an atomic. */
#define ACCEPT_RING 32

struct accept_rec {
	__u64 ts_ns;
	__u64 cookie;
};

struct accept_stats {
	__u64 accepts;  /* every accept, probes included */
	__u64 probes;   /* accepts of a connection a probe_comms task opened */
	__u64 held;     /* non-probe accepts put in the ring (slot held % ACCEPT_RING) */
	__u64 last_ns;  /* the latest of them */
	struct accept_rec ring[ACCEPT_RING];
};

/* Created by user space when it watches a netns (the program only updates
 * it in place): no preallocation for every CPU of 4096 entries. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct accept_stats);
} scope_accepts SEC(".maps");

/* The kubelet's command names (--kubelet-comm): an accept of a connection
 * one of them opened is a probe, left out of last_ns and the ring. */
struct comm_key {
	char c[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, struct comm_key);
	__type(value, __u8);
} probe_comms SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
} events SEC(".maps");

/* Ring-buffer reserve failures, per CPU and per event type (indexed by
 * enum event_type; 0 holds any type beyond the table), summed by user
 * space: a flood that fills the ring says which records it cost. */
#define LOST_TYPES 16

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LOST_TYPES);
	__type(key, __u32);
	__type(value, __u64);
} lost SEC(".maps");

/* Keyed by the struct sock address: the only identity every hook sees. A
 * plain hash, not an LRU: an LRU would evict a live connection silently,
 * and every accepted connection passes a teardown state that deletes its
 * entry. When it is full a new connection goes untracked and conn_full
 * counts it, so user space can mark the terminations it may touch. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, struct conn);
} conns SEC(".maps");

/* Accepted connections not tracked because conns was full, per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} conn_full SEC(".maps");

/* Node-local connection sources (bpf/sources.h): the watched pods'
 * addresses, and recent connects to them by tasks of this node. */
struct addr_key {
	__u8 a[16]; /* IPv4 in the first 4 bytes, the rest zero */
};

/* local_dsts values: flags. DST_BLACKHOLE is set while the address's pod
 * terminates (bpf/blackhole.bpf.c reports SYNs to it the node drops). */
enum dst_flags {
	DST_WATCHED = 1,
	DST_BLACKHOLE = 2,
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct addr_key);
	__type(value, __u8);
} local_dsts SEC(".maps");

/* A few sockets per (source, pod address): the kubelet may run a readiness
 * and a liveness probe at the same moment. The oldest slot is overwritten;
 * a stale one is told apart by its cookie and port. */
#define SYN_SLOTS 4

struct syn_key {
	__u8 saddr[16];
	__u8 daddr[16];
	__u16 dport; /* 0: the pod's port is not in the key (sources.h) */
	__u16 pad;
	__u32 pad2;
};

struct syn_slot {
	__u64 sk;
	__u64 cookie; /* tells a live socket from a new one at the same address */
	__u64 cgroup;
	__u32 pid;
	__u32 pad;
	char comm[16];
};

struct syn_slots {
	struct syn_slot s[SYN_SLOTS];
	__u32 next;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct syn_key);
	__type(value, struct syn_slots);
} local_syns SEC(".maps");

/* A thread group: its tgid and its leader's start time, which a reused
 * tgid does not share. */
struct group_key {
	__u32 tgid;
	__u32 pad;
	__u64 start_time;
};

/* Groups whose exit the fallback exit program reported (bpf/exit.bpf.c).
 * The duplicates come within microseconds of the first report, so an LRU
 * that forgets old groups loses nothing; each entry is one exit of a
 * watched process. Shared, so that user space can count its evictions. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct group_key);
	__type(value, __u8);
} group_exits SEC(".maps");

/* Inserts into the LRU maps, per CPU, indexed by enum lru_map. Neither map
 * deletes an entry, so user space counts the evictions as the inserts
 * minus the entries left: an LRU forgets silently, and an eviction of a
 * local_syns entry between a connect and its accept loses that
 * connection's node-local source. */
enum lru_map {
	LRU_LOCAL_SYNS = 0,
	LRU_GROUP_EXITS = 1,
	LRU_MAPS = 2,
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LRU_MAPS);
	__type(key, __u32);
	__type(value, __u64);
} lru_inserts SEC(".maps");

static __always_inline void lru_inserted(__u32 which)
{
	__u64 *n = bpf_map_lookup_elem(&lru_inserts, &which);
	if (n)
		(*n)++; /* per CPU: no other writer */
}



/* Set by `drainwatch trace` without filters; the verifier prunes the map
 * lookups when it is false at load time. */
volatile const bool watch_all = false;

/* Kernel compatibility (Linux 5.10 on): small helpers whose body depends on
 * what the running kernel offers, chosen by constants the loader sets
 * (collector/kernel/compat.go). The verifier prunes the branch a constant
 * rules out, so a helper the kernel lacks is never seen by it. */

/* bpf_get_socket_cookie is callable from tracing programs since Linux 5.12. */
volatile const bool cookie_helper = true;

/* The socket's cookie. Where tracing programs cannot call the helper, the
 * cookie is read as it stands: 0 unless something (SO_COOKIE, a diag dump)
 * generated it. */
static __always_inline __u64 sock_cookie(const struct sock *sk)
{
	if (cookie_helper)
		return bpf_get_socket_cookie((void *)sk);
	return BPF_CORE_READ(sk, __sk_common.skc_cookie.counter);
}

/* An identity for a socket that user space joins events by: its cookie, or
 * where it has none, a number no cookie takes (cookies count up from 1;
 * this one has the top bit set and is made of the time and the CPU). */
static __always_inline __u64 sock_identity(const struct sock *sk)
{
	__u64 c = sock_cookie(sk);
	if (c)
		return c;
	return (1ULL << 63) | ((bpf_ktime_get_ns() << 8) & ~(1ULL << 63)) |
	       (bpf_get_smp_processor_id() & 0xff);
}

/* The current task for CO-RE reads. bpf_get_current_task_btf (a BTF
 * pointer, direct reads) needs Linux 5.11; this works from 5.10 on. */
static __always_inline struct task_struct *current_task(void)
{
	return (struct task_struct *)bpf_get_current_task();
}

static __always_inline bool scope_watched(__u32 kind, __u64 id)
{
	struct scope_key key = { .id = id, .kind = kind };
	return bpf_map_lookup_elem(&scopes, &key) != NULL;
}

static __always_inline bool netns_watched(__u32 ino)
{
	return watch_all || scope_watched(SCOPE_NETNS, ino);
}

/* The flags of a watched netns, 0 when it is not watched; watch_all is a
 * watched scope with detail everywhere. */
static __always_inline __u8 netns_flags(__u32 ino)
{
	if (watch_all)
		return SCOPE_WATCHED | SCOPE_DETAIL;
	struct scope_key key = { .id = ino, .kind = SCOPE_NETNS };
	__u8 *f = bpf_map_lookup_elem(&scopes, &key);
	return f ? *f : 0;
}

static __always_inline __u32 sock_netns(const struct sock *sk)
{
	return BPF_CORE_READ(sk, __sk_common.skc_net.net, ns.inum);
}

static __always_inline __u64 task_cgroup_id(struct task_struct *t)
{
	return BPF_CORE_READ(t, cgroups, dfl_cgrp, kn, id);
}

static __always_inline __u32 task_netns(struct task_struct *t)
{
	return BPF_CORE_READ(t, nsproxy, net_ns, ns.inum);
}

/* The task's thread-group pid as its own pid namespace numbers it: 1 for a
 * container's init, which ignores signals it has no handler for. */
static __always_inline bool is_ns_init(struct task_struct *t)
{
	struct pid *p = BPF_CORE_READ(t, group_leader, thread_pid);
	unsigned int level = BPF_CORE_READ(p, level);
	struct upid up = {};
	if (level > 32)
		return false;
	bpf_probe_read_kernel(&up, sizeof(up), &p->numbers[level]);
	return up.nr == 1;
}

/* A task is in scope when its cgroup or its network namespace is watched:
 * at most two lookups, on rare events only (signals, exits). */
static __always_inline bool task_watched(struct task_struct *t)
{
	if (watch_all)
		return true;
	return scope_watched(SCOPE_CGROUP, task_cgroup_id(t)) ||
	       scope_watched(SCOPE_NETNS, task_netns(t));
}

static __always_inline struct event *event_reserve(__u8 type)
{
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		__u32 slot = type < LOST_TYPES ? type : 0;
		__u64 *n = bpf_map_lookup_elem(&lost, &slot);
		if (n)
			(*n)++;
		return NULL;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->type = type;
	e->ts_ns = bpf_ktime_get_ns();
	return e;
}

/* Submit without waking the reader until WAKEUP_BYTES are pending: a
 * wakeup per event (an IPI and two context switches) would cost more than
 * the probes themselves under connection churn. The reader also polls every
 * few milliseconds, which bounds the delay of a lone event. */
#define WAKEUP_BYTES (64 << 10)

static __always_inline void event_submit(struct event *e)
{
	__u64 pending = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);
	bpf_ringbuf_submit(e, pending >= WAKEUP_BYTES ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP);
}

/* Fill the addresses of a socket from its sock_common, the part shared by
 * full, request and timewait sockets (RST paths may hand us any of them). */
static __always_inline void event_sock_addrs(struct event *e, const struct sock *sk)
{
	e->family = BPF_CORE_READ(sk, __sk_common.skc_family);
	e->lport = BPF_CORE_READ(sk, __sk_common.skc_num);
	/* Closing unhashes a socket and zeroes skc_num before its state
	 * change, and before the RST of one closed with SO_LINGER 0 or with
	 * unread data (tcp_close, tcp_disconnect): inet_sport, which the
	 * kernel leaves in place, still holds the local port. */
	if (!e->lport)
		e->lport = bpf_ntohs(BPF_CORE_READ((const struct inet_sock *)sk, inet_sport));
	e->rport = bpf_ntohs(BPF_CORE_READ(sk, __sk_common.skc_dport));
	if (e->family == AF_INET6) {
		BPF_CORE_READ_INTO(&e->laddr, sk, __sk_common.skc_v6_rcv_saddr.in6_u.u6_addr8);
		BPF_CORE_READ_INTO(&e->raddr, sk, __sk_common.skc_v6_daddr.in6_u.u6_addr8);
		return;
	}
	BPF_CORE_READ_INTO((__u32 *)e->laddr, sk, __sk_common.skc_rcv_saddr);
	BPF_CORE_READ_INTO((__u32 *)e->raddr, sk, __sk_common.skc_daddr);
}

/* The current task as owner: set for events that run in process context. */
static __always_inline void event_current(struct event *e)
{
	__u64 id = bpf_get_current_pid_tgid();
	e->pid = id >> 32;
	e->tid = (__u32)id;
	e->cgroup_id = bpf_get_current_cgroup_id();
	bpf_get_current_comm(e->comm, sizeof(e->comm));
}

/* A task as the event's subject (the target of a signal, the exiting
 * process), where current is someone else or irrelevant: its ids, cgroup,
 * network namespace, whether it is its PID namespace's init, and comm. */
static __always_inline void event_task(struct event *e, struct task_struct *task)
{
	e->pid = BPF_CORE_READ(task, tgid);
	e->tid = BPF_CORE_READ(task, pid);
	e->cgroup_id = task_cgroup_id(task);
	e->netns = task_netns(task);
	e->target_init = is_ns_init(task);
	BPF_CORE_READ_STR_INTO(&e->comm, task, comm);
}
