//go:build ignore

/* Process exits in watched scopes, once per thread group: the last thread
 * to exit carries the group's status. Two programs, one loaded: the
 * tracepoint's group_dead argument where the kernel has it (Linux >= 6.16),
 * else signal->live reaching 0. do_exit decrements live well before the
 * tracepoint, so every thread of a group exiting at the same moment may
 * see 0: the fallback reports the group once, the first time, through
 * group_exits (bpf/drainwatch.h). */
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
	if (BPF_CORE_READ(task, signal, live.counter) != 0 || !task_watched(task))
		return 0;
	struct group_key key = {
		.tgid = BPF_CORE_READ(task, tgid),
		.start_time = BPF_CORE_READ(task, group_leader, start_time),
	};
	__u8 one = 1;
	/* Only the first thread to get here inserts the key. */
	if (bpf_map_update_elem(&group_exits, &key, &one, BPF_NOEXIST) == 0) {
		lru_inserted(LRU_GROUP_EXITS);
		emit_exit(task);
	}
	return 0;
}
