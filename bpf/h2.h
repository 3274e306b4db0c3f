/* HTTP/2 cleartext (prior knowledge) on accepted connections: which client
 * streams are open, from the frame headers of the bytes the server reads
 * and sends. Both sides are parsed in the server's own read and write
 * system calls (sock_recv_length, sock_send_length) from the user buffer of
 * the call, found in the task's syscall registers: the bytes come in stream
 * order, exactly once, and only connections that are tracked pay.
 *
 * A connection is HTTP/2 when the first bytes the server reads are the
 * client preface. A HEADERS frame on a new (higher, odd) client stream id
 * opens a stream; the server ending it (END_STREAM on its HEADERS or DATA)
 * or RST_STREAM from either side closes it. Control frames (SETTINGS, PING,
 * WINDOW_UPDATE, PRIORITY, GOAWAY) change nothing. When the parser cannot
 * follow (a system call it does not know such as sendfile or io_uring, more
 * than H2_STEPS frame headers and payloads in one call, more than H2_SLOTS
 * open streams, more than H2_IOVS iovecs), the connection is "lost" and
 * falls back to the byte rule of bpf/inflight.h for the rest of its life. */
#pragma once

#include "drainwatch.h"

enum conn_proto {
	PROTO_UNKNOWN = 0, /* nothing read yet */
	PROTO_PREFACE = 1, /* the bytes read so far are a prefix of the preface */
	PROTO_H2 = 2,      /* HTTP/2, streams followed */
	PROTO_OTHER = 3,   /* not HTTP/2: the byte rule */
	PROTO_H2_LOST = 4, /* HTTP/2 the parser could not follow: the byte rule */
};

#define H2_PREFACE_LEN 24
#define H2_HDR_LEN 9
#define H2_SLOTS 16
#define H2_STEPS 512 /* frame headers and payload skips per system call */
#define H2_IOVS 8   /* iovecs followed per readv/writev/recvmsg/sendmsg (a power of 2) */

#define H2_DATA 0
#define H2_HEADERS 1
#define H2_RST_STREAM 3
#define H2_END_STREAM 1

_Static_assert(sizeof(((struct conn *)0)->streams) == H2_SLOTS * sizeof(__u32), "H2_SLOTS");

/* Byte j of the client preface "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", from three
 * little-endian words: arithmetic the verifier needs no bounds for. */
static __always_inline __u8 h2_preface_byte(__u32 j)
{
	__u64 w = j < 8 ? 0x5448202a20495250ULL : j < 16 ? 0x0a0d302e322f5054ULL : 0x0a0d0a0d4d530a0dULL;
	return w >> ((j & 7) * 8);
}

/* The system call numbers of the socket reads and writes followed, and the
 * register that holds the number, per architecture: x86_64's own table
 * (arch/x86/entry/syscalls/syscall_64.tbl), arm64's the generic one
 * (include/uapi/asm-generic/unistd.h). The arguments come from the user
 * registers through bpf_tracing.h's PT_REGS_PARM*_CORE_SYSCALL. */
#if defined(__TARGET_ARCH_x86)
#define NR_READ 0
#define NR_WRITE 1
#define NR_READV 19
#define NR_WRITEV 20
#define NR_SENDTO 44
#define NR_RECVFROM 45
#define NR_SENDMSG 46
#define NR_RECVMSG 47
#define SYSCALL_NR(regs) BPF_CORE_READ(regs, orig_ax)
#elif defined(__TARGET_ARCH_arm64)
#define NR_READ 63
#define NR_WRITE 64
#define NR_READV 65
#define NR_WRITEV 66
#define NR_SENDTO 206
#define NR_RECVFROM 207
#define NR_SENDMSG 211
#define NR_RECVMSG 212
#define SYSCALL_NR(regs) BPF_CORE_READ(regs, syscallno)
#else
#error "h2.h: no system call table for this architecture"
#endif

/* The user memory a read or write of ret bytes filled or sent. */
struct h2_chunks {
	const __u8 *p[H2_IOVS];
	__u64 len[H2_IOVS];
	__u32 n;
};

struct h2_iovs {
	struct h2_chunks *ch;
	const struct iovec *iov;
	__u64 cnt, ret;
	bool ok;
};

/* One iovec of a readv/writev/recvmsg/sendmsg (bpf_loop callback). */
static long iov_step(__u32 i, void *ctx)
{
	struct h2_iovs *v = ctx;
	if (v->ret == 0) {
		v->ok = true;
		return 1;
	}
	__u32 k = i & (H2_IOVS - 1); /* i itself, in a register the verifier bounds */
	if (k != i || k >= v->cnt)
		return 1;
	struct iovec iov;
	if (bpf_probe_read_user(&iov, sizeof(iov), &v->iov[k]))
		return 1;
	__u64 n = iov.iov_len < v->ret ? iov.iov_len : v->ret;
	v->ch->p[k] = iov.iov_base;
	v->ch->len[k] = n;
	v->ch->n = k + 1;
	v->ret -= n;
	v->ok = v->ret == 0;
	return 0;
}

static __always_inline bool iovs_chunks(struct h2_chunks *ch, const struct iovec *iov, __u64 cnt, __u64 ret)
{
	struct h2_iovs v = { .ch = ch, .iov = iov, .cnt = cnt, .ret = ret };
	bpf_loop(H2_IOVS, iov_step, &v, 0);
	return v.ok;
}

/* The chunks of the current system call that moved ret bytes, false when it
 * is not a read or write the parser knows. */
static __always_inline bool syscall_chunks(struct h2_chunks *ch, long ret)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	if (!regs)
		return false;
	long nr = SYSCALL_NR(regs);
	__u64 arg1 = PT_REGS_PARM2_CORE_SYSCALL(regs), arg2 = PT_REGS_PARM3_CORE_SYSCALL(regs);
	switch (nr) {
	case NR_READ: case NR_WRITE: case NR_RECVFROM: case NR_SENDTO:
		ch->p[0] = (const __u8 *)arg1;
		ch->len[0] = ret;
		ch->n = 1;
		return true;
	case NR_READV: case NR_WRITEV:
		return iovs_chunks(ch, (const struct iovec *)arg1, arg2, ret);
	case NR_RECVMSG: case NR_SENDMSG: {
		struct user_msghdr m;
		if (bpf_probe_read_user(&m, sizeof(m), (const void *)arg1))
			return false;
		return iovs_chunks(ch, m.msg_iov, m.msg_iovlen, ret);
	}
	}
	return false;
}

static __always_inline bool h2_open(struct conn *c, __u32 sid)
{
	for (int i = 0; i < H2_SLOTS; i++) {
		if (c->streams[i] == 0) {
			c->streams[i] = sid;
			return true;
		}
	}
	return false;
}

static __always_inline void h2_close(struct conn *c, __u32 sid)
{
	for (int i = 0; i < H2_SLOTS; i++) {
		if (c->streams[i] == sid)
			c->streams[i] = 0;
	}
}

static __always_inline bool h2_any_open(const struct conn *c)
{
	for (int i = 0; i < H2_SLOTS; i++) {
		if (c->streams[i])
			return true;
	}
	return false;
}

/* One whole frame header, of the client's frames (rx) or the server's. */
static __always_inline bool h2_frame(struct conn *c, struct h2_dir *d, const __u8 *h, bool rx)
{
	d->left = (__u32)h[0] << 16 | (__u32)h[1] << 8 | h[2];
	__u8 type = h[3], flags = h[4];
	__u32 sid = ((__u32)h[5] & 0x7f) << 24 | (__u32)h[6] << 16 | (__u32)h[7] << 8 | h[8];
	if (sid == 0)
		return true;
	if (type == H2_RST_STREAM) {
		h2_close(c, sid);
		return true;
	}
	if (rx) {
		if (type != H2_HEADERS || !(sid & 1) || sid <= c->max_sid)
			return true;
		c->max_sid = sid;
		return h2_open(c, sid);
	}
	if ((type == H2_HEADERS || type == H2_DATA) && (flags & H2_END_STREAM))
		h2_close(c, sid);
	return true;
}

/* A walk of one direction's frames through the chunks of a system call. */
struct h2_walk {
	struct conn *c;
	const struct h2_chunks *ch;
	__u64 off;
	__u32 ci;
	bool rx;
	int result; /* 0 walking, 1 all bytes followed, -1 lost */
};

/* One step of the walk (bpf_loop callback, verified once): skip payload
 * bytes, or take a frame header. */
static long h2_step(__u32 i, void *ctx)
{
	struct h2_walk *w = ctx;
	struct conn *c = w->c;
	struct h2_dir *d = w->rx ? &c->rx : &c->tx;
	__u32 ci = w->ci;
	if (ci >= w->ch->n || ci >= H2_IOVS) {
		w->result = 1;
		return 1;
	}
	__u64 len = w->ch->len[ci], off = w->off;
	const __u8 *p = w->ch->p[ci];
	if (off >= len) {
		w->ci = ci + 1;
		w->off = 0;
		return 0;
	}
	__u64 avail = len - off;
	if (d->left) {
		__u64 n = d->left < avail ? d->left : avail;
		d->left -= n;
		w->off = off + n;
		return 0;
	}
	if (d->got == 0 && avail >= H2_HDR_LEN) {
		__u8 h[H2_HDR_LEN];
		w->off = off + H2_HDR_LEN;
		if (bpf_probe_read_user(h, sizeof(h), p + off) || !h2_frame(c, d, h, w->rx))
			goto lost;
		return 0;
	}
	/* A header split across chunks or calls: a byte at a time. */
	__u8 b, got = d->got;
	if (got >= H2_HDR_LEN || bpf_probe_read_user(&b, 1, p + off))
		goto lost;
	d->hdr[got] = b;
	w->off = off + 1;
	d->got = ++got;
	if (got == H2_HDR_LEN) {
		d->got = 0;
		if (!h2_frame(c, d, d->hdr, w->rx))
			goto lost;
	}
	return 0;
lost:
	w->result = -1;
	return 1;
}

/* Follows the frames of one direction through the chunks, from offset off
 * of chunk ci. False when it cannot (the connection is then lost). */
static __always_inline bool h2_parse(struct conn *c, const struct h2_chunks *ch, __u32 ci, __u64 off, bool rx)
{
	struct h2_walk w = { .c = c, .ch = ch, .ci = ci, .off = off, .rx = rx };
	bpf_loop(H2_STEPS, h2_step, &w, 0);
	if (w.result)
		return w.result > 0;
	/* Out of steps: fine only if the last chunk was just used up. */
	return w.ci < H2_IOVS && w.ci + 1 == ch->n && w.off >= ch->len[w.ci];
}

/* A walk of the client preface through the chunks of a read. */
struct h2_preface_walk {
	const struct h2_chunks *ch;
	__u64 off;
	__u32 ci, got;
	bool mismatch;
};

/* One byte of the preface, or a step to the next chunk (bpf_loop
 * callback): once per connection, and HTTP/1 differs at its second byte. */
static long preface_step(__u32 i, void *ctx)
{
	struct h2_preface_walk *m = ctx;
	__u32 ci = m->ci;
	if (m->got >= H2_PREFACE_LEN || ci >= m->ch->n || ci >= H2_IOVS)
		return 1;
	if (m->off >= m->ch->len[ci]) {
		m->ci = ci + 1;
		m->off = 0;
		return 0;
	}
	__u8 b;
	if (bpf_probe_read_user(&b, 1, m->ch->p[ci] + m->off) || b != h2_preface_byte(m->got)) {
		m->mismatch = true;
		return 1;
	}
	m->got++;
	m->off++;
	return 0;
}

/* Matches the start of what the server reads against the client preface,
 * from where the previous reads left it. False when the bytes are not the
 * preface; else *ci and *off say where the frames start (past the last
 * chunk while the preface is incomplete). */
static __always_inline bool h2_match_preface(struct conn *c, const struct h2_chunks *ch, __u32 *ci, __u64 *off)
{
	struct h2_preface_walk m = { .ch = ch, .got = c->preface_got };
	bpf_loop(H2_PREFACE_LEN + H2_IOVS, preface_step, &m, 0);
	if (m.mismatch)
		return false;
	c->preface_got = m.got;
	*ci = m.ci;
	*off = m.off;
	return true;
}
