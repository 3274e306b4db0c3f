//go:build ignore

/* Process exits in watched scopes, once per thread group: the last thread
 * to exit carries the group's status. Two programs, one loaded: the
 * tracepoint's group_dead argument where the kernel has it, else
 * signal->live reaching 0, which two threads exiting at the same moment can
 * both observe (the fallback may then report a group exit twice). */
#include "drainwatch.h"

static __always_inline void emit_exit(struct task_struct *task)
{
	if (!task_watched(task))
		return;
	struct event *e = event_reserve(EV_EXIT);
	if (!e)
		return;
	e->exit_status = BPF_CORE_READ(task, exit_code);
	event_task(e, task);
	event_submit(e);
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(process_exit, struct task_struct *task, bool group_dead)
{
	if (group_dead)
		emit_exit(task);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(process_exit_live, struct task_struct *task)
{
	if (BPF_CORE_READ(task, signal, live.counter) == 0)
		emit_exit(task);
	return 0;
}
