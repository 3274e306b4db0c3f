package e2e_test

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/lab"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

// TestStatefulSetRollout: `kubectl rollout restart` of a StatefulSet of 3
// naive servers, carried out by the real statefulset controller: it
// deletes the pods one by one, highest ordinal first, each after the
// previous one's replacement is ready. Clients hit each pod straight with
// a /slow in flight at every stop signal, so each old pod refuses while it
// drains. Each termination's refusals are its clients' exactly, its
// workload is the StatefulSet at the pod's controller-revision-hash, and
// its cause is rollout (the StatefulSet's updateRevision moved past it).
func TestStatefulSetRollout(t *testing.T) {
	c, ds := startCluster(t, "e2s-", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ns := unique("e2e-sts")
	sts := serverStatefulSet(ns, "web", 3)
	must(t, c.Apply(ctx, cluster.Namespace(ns), sts, cluster.ServiceFor(ns, "web")))
	rolledOut(ctx, t, c, ns, "statefulset/web")
	old := readyPods(ctx, t, c, ns, 3)
	waitWatching(ctx, t, ds, old)

	lctx, stopLoads := context.WithCancel(ctx)
	defer stopLoads()
	var loads []<-chan []client.Request
	for i := range old {
		loads = append(loads, startLoadFor(lctx, c, cluster.PodAddr(&old[i], cluster.ServerPort), time.Minute))
	}
	time.Sleep(500 * time.Millisecond)
	if _, err := c.Kubectl(ctx, "-n", ns, "rollout", "restart", "statefulset/web"); err != nil {
		t.Fatal(err)
	}
	rolledOut(ctx, t, c, ns, "statefulset/web")
	stopLoads() // replacements have new addresses: the old ones get no more traffic that counts

	var prev *correlate.Termination
	for _, name := range []string{"web-2", "web-1", "web-0"} { // the controller's order
		i := podIndex(t, old, name)
		p := &old[i]
		reqs := <-loads[i]
		got := waitComplete(ctx, t, daemonOf(t, ds, p), string(p.UID))
		checkOwnedStop(t, got, p, reqs, correlate.CauseRollout,
			wantWorkload(ns, "StatefulSet", "web", p.Labels["controller-revision-hash"]))
		if prev != nil && !got.Marks.DeletionSeen.After(prev.Marks.PodGone) {
			t.Errorf("%s deleted at %v, before the previous pod was gone (%v): want one by one",
				name, got.Marks.DeletionSeen, prev.Marks.PodGone)
		}
		prev = &got
	}
}

// TestCronJobRun: a CronJob's Job runs a naive server, and the Job is
// deleted while its pod serves: what the cronjob controller does to a
// running Job under concurrencyPolicy Replace, and what a person does to
// stop a run (background propagation: the garbage collector deletes the
// pod). That is the meaningful stop of a Job's pod: a run that completes
// (its init exits 0, nobody stopped it) is not a termination (correlate's
// exitBegins) and a finished pod deleted later by the history limit no
// longer runs. The Job is made from the CronJob as `kubectl create job
// --from=cronjob/` does (the owner chain is the scheduled runs'; waiting
// for a schedule would be a minute of nothing), then run by the real job
// controller. The workload is the CronJob, not the Job, with no revision;
// the cause is delete (a Job's pod deleted: cause.go's fromOwner).
func TestCronJobRun(t *testing.T) {
	c, ds := startCluster(t, "e2j-", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := unique("e2e-cronjob")
	must(t, c.Apply(ctx, cluster.Namespace(ns), serverCronJob(ns, "batch")))
	if _, err := c.Kubectl(ctx, "-n", ns, "create", "job", "batch-run", "--from=cronjob/batch"); err != nil {
		t.Fatal(err)
	}
	pods := readyPodsOf(ctx, t, c, ns, "app=batch", 1)
	waitWatching(ctx, t, ds, pods)
	p := &pods[0]

	lctx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	load := startLoadFor(lctx, c, cluster.PodAddr(p, cluster.ServerPort), time.Minute)
	time.Sleep(time.Second)
	must(t, c.Client.BatchV1().Jobs(ns).Delete(ctx, "batch-run",
		metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}))
	must(t, c.WaitPodGone(ctx, ns, p.Name))
	stopLoad()
	got := waitComplete(ctx, t, daemonOf(t, ds, p), string(p.UID))
	checkOwnedStop(t, got, p, <-load, correlate.CauseDelete, wantWorkload(ns, "CronJob", "batch", ""))
}

// checkOwnedStop compares a deleted pod's termination with what its
// clients saw and checks its cause and workload exactly.
func checkOwnedStop(t *testing.T, got correlate.Termination, p *corev1.Pod, reqs []client.Request, cause string, w workloadWant) {
	t.Helper()
	refused := lab.RefusedTo(cluster.PodAddr(p, cluster.ServerPort), reqs)
	n := got.Counts
	t.Logf("%s: clients %s refused %d; drainwatch %+v cause %s (%s) workload %+v", p.Name, client.Summarize(reqs), refused,
		n, got.Cause, got.CauseEvidence, got.Workload)
	// refused == 0 would make the scenario no proof: the /slow in flight
	// at the stop signal keeps the naive server draining, listener closed.
	if n.RefusedAfterSigterm != refused || n.RefusedBeforeSigterm != 0 || n.RequestsKilledBySigkill != 0 || refused == 0 {
		t.Errorf("%s: refused after %d before %d killed %d, clients refused %d: want %d 0 0 (and some refused)",
			p.Name, n.RefusedAfterSigterm, n.RefusedBeforeSigterm, n.RequestsKilledBySigkill, refused, refused)
	}
	if got.Cause != cause || got.Container != "" || got.Partial {
		t.Errorf("%s: cause %q (%s) container %q partial %v, want %s of the pod, complete",
			p.Name, got.Cause, got.CauseEvidence, got.Container, got.PartialReasons, cause)
	}
	if got.Workload.Namespace != w.ns || got.Workload.Kind != w.kind || got.Workload.Name != w.name || got.Workload.Revision != w.revision {
		t.Errorf("%s: workload %+v, want %+v", p.Name, got.Workload, w)
	}
}

type workloadWant struct{ ns, kind, name, revision string }

func wantWorkload(ns, kind, name, revision string) workloadWant {
	return workloadWant{ns, kind, name, revision}
}

func podIndex(t *testing.T, pods []corev1.Pod, name string) int {
	t.Helper()
	for i := range pods {
		if pods[i].Name == name {
			return i
		}
	}
	t.Fatalf("no pod %s", name)
	return -1
}

// rolledOut waits for `kubectl rollout status` of what (statefulset/web).
func rolledOut(ctx context.Context, t *testing.T, c *cluster.Cluster, ns, what string) {
	t.Helper()
	if out, err := c.Kubectl(ctx, "-n", ns, "rollout", "status", what, "--timeout=2m"); err != nil {
		t.Fatalf("rollout status %s: %v: %s", what, err, out)
	}
}

// serverStatefulSet is a StatefulSet of the workload server, with the pod
// template of cluster.ServerDeployment.
func serverStatefulSet(ns, name string, replicas int32) *appsv1.StatefulSet {
	dep := cluster.ServerDeployment(ns, name, workload.ModeNaive, replicas)
	return &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.StatefulSetSpec{Replicas: &replicas, ServiceName: name,
			Selector: dep.Spec.Selector, Template: dep.Spec.Template},
	}
}

// serverCronJob is a CronJob whose runs are the workload server (never
// completing by itself), scheduled once a year and suspended: runs are
// made by hand.
func serverCronJob(ns, name string) *batchv1.CronJob {
	tmpl := cluster.ServerDeployment(ns, name, workload.ModeNaive, 1).Spec.Template
	tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	return &batchv1.CronJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "CronJob"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: batchv1.CronJobSpec{Schedule: "0 0 1 1 *", Suspend: ptr.To(true),
			ConcurrencyPolicy: batchv1.ReplaceConcurrent,
			JobTemplate:       batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{BackoffLimit: ptr.To(int32(0)), Template: tmpl}}},
	}
}
