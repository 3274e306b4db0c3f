//go:build ignore

/* HTTP/2 bookkeeping for accepted connections of watched scopes, in the
 * server's read and write system calls: the preface and the frames that
 * open and close client streams (bpf/h2.h). Every other connection, and an
 * HTTP/2 one the parser lost, is judged at teardown from its socket's own
 * state (bpf/inflight.h), which needs no hook here. Both hooks run on every
 * socket read and write of the node (one hash lookup, an early return for
 * untracked sockets), so user space attaches them only on demand
 * (collector/kernel MessageProbes). */
#include "drainwatch.h"
#include "h2.h"

#define MSG_PEEK 2

/* The server read ret bytes of c: the preface decides HTTP/2 on the first
 * read, then the client's frames open and reset streams. */
static __always_inline void h2_read(struct conn *c, long ret)
{
	struct h2_chunks ch = {};
	if (!syscall_chunks(&ch, ret)) {
		c->proto = c->proto == PROTO_H2 ? PROTO_H2_LOST : PROTO_OTHER;
		return;
	}
	__u32 ci = 0;
	__u64 off = 0;
	if (c->proto != PROTO_H2) {
		if (!h2_match_preface(c, &ch, &ci, &off)) {
			c->proto = PROTO_OTHER;
			return;
		}
		if (c->preface_got < H2_PREFACE_LEN) {
			c->proto = PROTO_PREFACE; /* a read shorter than the preface */
			return;
		}
		c->proto = PROTO_H2;
	}
	if (!h2_parse(c, &ch, ci, off, true))
		c->proto = PROTO_H2_LOST;
}

SEC("tp_btf/sock_recv_length")
int BPF_PROG(sock_recv, struct sock *sk, int ret, int flags)
{
	/* A peek leaves the bytes in the queue: they are read again later. */
	if (ret <= 0 || (flags & MSG_PEEK))
		return 0;
	__u64 key = (__u64)sk;
	struct conn *c = bpf_map_lookup_elem(&conns, &key);
	if (!c)
		return 0;
	if (c->proto == PROTO_UNKNOWN || c->proto == PROTO_PREFACE || c->proto == PROTO_H2)
		h2_read(c, ret);
	return 0;
}

SEC("tp_btf/sock_send_length")
int BPF_PROG(sock_send, struct sock *sk, int ret, int flags)
{
	if (ret <= 0)
		return 0;
	__u64 key = (__u64)sk;
	struct conn *c = bpf_map_lookup_elem(&conns, &key);
	if (!c)
		return 0;
	/* Before the preface is read, the server's bytes are followed as
	 * frames too: gRPC-Go sends its SETTINGS before reading the client's
	 * preface. A protocol where the server speaks first (not HTTP/2)
	 * costs this until its first read, when the preface does not match. */
	__u8 proto = c->proto;
	if (proto != PROTO_H2 && proto != PROTO_UNKNOWN && proto != PROTO_PREFACE)
		return 0;
	struct h2_chunks ch = {};
	if (!syscall_chunks(&ch, ret) || !h2_parse(c, &ch, 0, 0, false))
		c->proto = proto == PROTO_H2 ? PROTO_H2_LOST : PROTO_OTHER;
	return 0;
}
