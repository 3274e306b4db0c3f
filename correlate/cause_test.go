package correlate

import (
	"testing"

	"github.com/drainwatch/drainwatch/collector"
)

func TestClassifyCause(t *testing.T) {
	deploy := func(rev string) collector.Workload {
		return collector.Workload{Namespace: "shop", Kind: "Deployment", Name: "web", Revision: rev}
	}
	sts := collector.Workload{Namespace: "shop", Kind: "StatefulSet", Name: "db", Revision: "db-6f7c"}
	stop := func(disruption, reason, message, owner string) collector.StopEvidence {
		return collector.StopEvidence{Disruption: disruption, Reason: reason, Message: message, OwnerRevision: owner}
	}
	shutdown := "Pod was terminated in response to imminent node shutdown."
	for _, tt := range []struct {
		name string
		in   causeInput
		want string
	}{
		{"rollout", causeInput{Deleted: true, Workload: deploy("4"), Stop: stop("", "", "", "5")}, CauseRollout},
		{"scale-down", causeInput{Deleted: true, Workload: deploy("5"), Stop: stop("", "", "", "5")}, CauseScaleDown},
		{"deployment, owner revision unknown", causeInput{Deleted: true, Workload: deploy("5")}, CauseUnknown},
		{"pod revision unknown", causeInput{Deleted: true, Workload: deploy(""), Stop: stop("", "", "", "5")}, CauseUnknown},
		{"statefulset rollout", causeInput{Deleted: true, Workload: sts, Stop: stop("", "", "", "db-7a8b")}, CauseRollout},
		{"statefulset scale-down", causeInput{Deleted: true, Workload: sts, Stop: stop("", "", "", "db-6f7c")}, CauseScaleDown},
		{"daemonset", causeInput{Deleted: true, Workload: collector.Workload{Kind: "DaemonSet", Name: "agent"}}, CauseRollout},
		{"bare pod deleted", causeInput{Deleted: true, Workload: collector.Workload{Kind: "none"}}, CauseDelete},
		{"cronjob's pod deleted", causeInput{Deleted: true, Workload: collector.Workload{Kind: "CronJob", Name: "backup"}}, CauseDelete},
		{"kubectl drain", causeInput{Deleted: true, Workload: deploy("5"), Stop: stop(disruptionEvictionByAPI, "", "", "5")}, CauseEviction},
		{"taint eviction", causeInput{Deleted: true, Workload: deploy("5"), Stop: stop(disruptionTaintManager, "", "", "5")}, CauseEviction},
		{"scheduler preemption", causeInput{Deleted: true, Workload: deploy("5"), Stop: stop(disruptionPreemptionByScheduler, "", "", "5")}, CausePreemption},
		{"pod GC", causeInput{Deleted: true, Workload: deploy("5"), Stop: stop(disruptionPodGC, "", "", "5")}, CauseDelete},
		{"node pressure before the deletion", causeInput{Workload: deploy("5"),
			Stop: stop(disruptionByKubelet, "Evicted", "The node was low on resource: memory.", "")}, CauseNodePressure},
		{"node pressure, no condition (API < 1.26)", causeInput{Workload: deploy("5"),
			Stop: stop("", "Evicted", "The node was low on resource: ephemeral-storage.", "")}, CauseNodePressure},
		{"node shutdown", causeInput{Workload: deploy("5"), Stop: stop(disruptionByKubelet, "Terminated", shutdown, "")}, CauseNodeShutdown},
		{"node shutdown, then deleted", causeInput{Deleted: true, Workload: deploy("5"), Stop: stop(disruptionByKubelet, "Terminated", shutdown, "5")}, CauseNodeShutdown},
		{"kubelet preemption", causeInput{Workload: deploy("5"),
			Stop: stop(disruptionByKubelet, "Preempting", "Preempted in order to admit critical pod", "")}, CausePreemption},
		{"kubelet, reason unknown", causeInput{Workload: deploy("5"), Stop: stop(disruptionByKubelet, "", "", "")}, CauseNodePressure},
		{"liveness", causeInput{Workload: deploy("5"), KillingMessage: "Container web failed liveness probe, will be restarted"}, CauseContainerRestart},
		{"startup", causeInput{Workload: deploy("5"), KillingMessage: "Container web failed startup probe, will be restarted"}, CauseContainerRestart},
		{"oom kill", causeInput{Workload: deploy("5"), OOMKilled: true}, CauseOOMKill},
		{"oom during a rollout's deletion", causeInput{Deleted: true, OOMKilled: true, Workload: deploy("4"), Stop: stop("", "", "", "5")}, CauseRollout},
		{"oom kill seen by the kernel only", causeInput{Workload: deploy("5"), KernelOOM: true, Exit: "died of SIGKILL"}, CauseOOMKill},
		{"crash", causeInput{Workload: deploy("5"), Exit: "exited with code 2"}, CauseContainerRestart},
		{"killed from outside", causeInput{Workload: deploy("5"), Exit: "died of SIGKILL"}, CauseContainerRestart},
		{"restarted after a stop signal", causeInput{Workload: deploy("5"), Restarted: true}, CauseContainerRestart},
		{"oom kill, then deleted", causeInput{Deleted: true, KernelOOM: true, Workload: deploy("4"), Stop: stop("", "", "", "5")}, CauseRollout},
		{"crash of a pod the kubelet evicts", causeInput{Workload: deploy("5"), Exit: "exited with code 1",
			Stop: stop(disruptionByKubelet, "Evicted", "The node was low on resource: memory.", "")}, CauseNodePressure},
		{"nothing known", causeInput{Workload: deploy("5")}, CauseUnknown},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, evidence := classifyCause(tt.in)
			if got != tt.want {
				t.Fatalf("cause %q (%s), want %q", got, evidence, tt.want)
			}
			if got != CauseUnknown && evidence == "" {
				t.Fatalf("cause %q without evidence", got)
			}
		})
	}
}
