package node_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/testenv/client"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSeedsExperimentByPodDeletion runs the seeds' script against a pod the
// agent terminates (the stop is an API deletion, so SIGTERM comes from the
// agent): /work every 20 ms for 1 s from the fabric, straight at the pod.
// The ground truth is checked request by request against the server's own
// log: nothing that started after the listener closed succeeds, nothing is
// refused while it was open.
func TestSeedsExperimentByPodDeletion(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	l := newLab(t, ctx, "t-seeds")
	for _, tc := range []struct{ mode, wantRefused string }{{"naive", "most"}, {"protocol", "none"}} {
		created, h := l.create(t, ctx, l.serverPod(tc.mode, tc.mode, 5, nil))
		ready := h.until(t, ctx, "Ready", podReady)
		info, _ := l.agent.Pod(created.UID)
		target := ready.Status.PodIP + ":8080"
		res, err := client.Seeds{Dial: l.fabric.Dial, Target: target, Pod: target, Stop: func(ctx context.Context) error {
			return l.client.CoreV1().Pods(l.ns).Delete(ctx, tc.mode, metav1.DeleteOptions{})
		}}.Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		h.lastBeforeDelete(t, ctx)
		term := l.agent.Terminations(created.UID)[0]
		closed, ok := deleted{log: readLog(t, info.Containers[0].LogPath)}.logEvent("shutdown_begin")
		if !ok {
			t.Fatalf("%s: server never closed its listener", tc.mode)
		}
		sum := client.Summarize(res.Work)
		t.Logf("%s: stop signal %.3f s after the delete call, listener closed at %.3f s\n%s", tc.mode,
			term.StopSignalAt.Sub(res.StopAt).Seconds(), closed.Time.Sub(res.StopAt).Seconds(), res.Timeline())
		checkAgainstListener(t, tc.mode, res.Work, closed.Time)
		switch got := fmt.Sprintf("slow=%s refused=%d", res.Slow.Outcome, sum[client.Refused]); {
		case tc.wantRefused == "none" && got != "slow=ok refused=0":
			t.Errorf("%s: %s, want slow=ok refused=0", tc.mode, got)
		case tc.wantRefused == "most" && (res.Slow.Outcome != client.OK || sum[client.Refused] < len(res.Work)/2):
			t.Errorf("%s: %s of %d, want the in-flight /slow ok and most refused", tc.mode, got, len(res.Work))
		}
	}
}

// checkAgainstListener: a request that began after the listener closed is
// refused; one that ended before it closed is ok.
func checkAgainstListener(t *testing.T, mode string, reqs []client.Request, closed time.Time) {
	t.Helper()
	for _, r := range reqs {
		switch {
		case r.Start.After(closed) && r.Outcome != client.Refused:
			t.Errorf("%s: request %d started %s after the listener closed: %s", mode, r.Seq, r.Start.Sub(closed), r.Outcome)
		case r.End.Before(closed) && r.Outcome != client.OK:
			t.Errorf("%s: request %d ended before the listener closed: %s (%s)", mode, r.Seq, r.Outcome, r.Err)
		}
	}
}
