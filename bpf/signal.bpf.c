//go:build ignore

/* Signals generated to tasks of watched scopes. In signal_generate `current`
 * is the sender; the target is the task argument, whose cgroup and network
 * namespace decide whether the signal is watched. */
#include "drainwatch.h"

#define SIGCHLD 17
#define SIGURG 23

SEC("tp_btf/signal_generate")
int BPF_PROG(signal_generate, int sig, struct kernel_siginfo *info,
	     struct task_struct *task, int group, int result)
{
	/* Go runtimes preempt goroutines with SIGURG every few milliseconds and
	 * every child exit sends SIGCHLD: neither is ever a stop signal, and
	 * reporting them would make signals the busiest events. */
	if (sig == SIGURG || sig == SIGCHLD)
		return 0;
	if (!task_watched(task))
		return 0;
	struct event *e = event_reserve(EV_SIGNAL);
	if (!e)
		return 0;
	e->signal = sig;
	e->signal_result = result;
	event_task(e, task);
	e->sender_pid = bpf_get_current_pid_tgid() >> 32;
	e->sender_cgroup = bpf_get_current_cgroup_id();
	bpf_get_current_comm(e->sender_comm, sizeof(e->sender_comm));
	event_submit(e);
	return 0;
}
