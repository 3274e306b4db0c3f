//go:build ignore

/* The network namespace of every process, read from its task: the binder
 * learns a pod's namespace inode from here instead of stat(2) on
 * /proc/<pid>/ns/net, which needs ptrace read access to the pod's processes
 * (CAP_SYS_PTRACE for those of another user, or with capabilities the
 * daemon lacks). A task iterator runs only when user space reads it. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* The depth of the reader's PID namespace (user space sets it from NSpid in
 * /proc/self/status): pids are reported as the reader's /proc names them. */
const volatile __u32 pidns_level = 0;

#define PF_KTHREAD 0x00200000

/* One record per process (thread-group leader); kernel threads as pid 0:
 * their namespace is the kernel's initial one, the host's. */
struct proc_netns {
	__u32 pid;
	__u32 netns;
};

SEC("iter/task")
int task_netns(struct bpf_iter__task *ctx)
{
	struct task_struct *t = ctx->task;
	if (!t || BPF_CORE_READ(t, pid) != BPF_CORE_READ(t, tgid))
		return 0;
	struct pid *p = BPF_CORE_READ(t, thread_pid);
	unsigned int level = BPF_CORE_READ(p, level);
	if (level < pidns_level || pidns_level > 32)
		return 0;
	struct upid up = {};
	bpf_probe_read_kernel(&up, sizeof(up), &p->numbers[pidns_level]);
	struct proc_netns rec = {
		.pid = (BPF_CORE_READ(t, flags) & PF_KTHREAD) ? 0 : up.nr,
		.netns = BPF_CORE_READ(t, nsproxy, net_ns, ns.inum),
	};
	if (rec.netns == 0)
		return 0; /* exiting: its namespaces are already released */
	bpf_seq_write(ctx->meta->seq, &rec, sizeof(rec));
	return 0;
}
