//go:build ignore

/* Process exits in watched scopes, once per thread group: the last thread
 * to exit carries the group's status. signal->live reaches 0 for that thread
 * before the tracepoint fires, on every kernel (unlike the group_dead
 * argument, which newer kernels added). */
#include "drainwatch.h"

SEC("tp_btf/sched_process_exit")
int BPF_PROG(process_exit, struct task_struct *task)
{
	if (BPF_CORE_READ(task, signal, live.counter) != 0)
		return 0;
	if (!task_watched(task))
		return 0;
	struct event *e = event_reserve(EV_EXIT);
	if (!e)
		return 0;
	e->exit_status = BPF_CORE_READ(task, exit_code);
	e->pid = BPF_CORE_READ(task, tgid);
	e->tid = BPF_CORE_READ(task, pid);
	e->cgroup_id = task_cgroup_id(task);
	e->netns = task_netns(task);
	e->target_init = is_ns_init(task);
	BPF_CORE_READ_STR_INTO(&e->comm, task, comm);
	event_submit(e);
	return 0;
}
