//go:build ignore

/* In-flight bookkeeping for accepted connections of watched scopes: a
 * request is in flight when the last data the server moved on a connection
 * was a read of request bytes (no answer sent since). Both hooks run in the
 * server's context on every socket read and write of the node, so they cost
 * one hash lookup and return early for sockets that are not tracked. */
#include "drainwatch.h"

#define MSG_PEEK 2

SEC("tp_btf/sock_recv_length")
int BPF_PROG(sock_recv, struct sock *sk, int ret, int flags)
{
	/* A peek leaves the bytes in the queue: teardown sees them as unread. */
	if (ret <= 0 || (flags & MSG_PEEK))
		return 0;
	__u64 key = (__u64)sk;
	struct conn *c = bpf_map_lookup_elem(&conns, &key);
	if (c)
		c->unanswered = 1;
	return 0;
}

SEC("tp_btf/sock_send_length")
int BPF_PROG(sock_send, struct sock *sk, int ret, int flags)
{
	if (ret <= 0)
		return 0;
	__u64 key = (__u64)sk;
	struct conn *c = bpf_map_lookup_elem(&conns, &key);
	if (c)
		c->unanswered = 0;
	return 0;
}
