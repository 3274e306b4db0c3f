package kube

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/drainwatch/drainwatch/testenv/controlplane/cptest"
)

// TestPodWatchRefusedIsAFailure stops the real API server under a running
// pod watch: the reflector retries the refused watch on its own, with
// backoff and without a relist, and never calls the watch error handler.
// Each refused retry must still count as a pod watch failure (what
// liveness reports when it lasts), and the watch reopened once the API
// server is back must end the run of failures.
func TestPodWatchRefusedIsAFailure(t *testing.T) {
	cp := cptest.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	k, err := New(Config{NodeName: "node-refused", Rest: cp.RestConfig, Sink: discardSink{}, Log: zerolog.New(zerolog.NewTestWriter(t))})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go k.Run(runCtx)
	waitFor(ctx, t, "the pod watch synced", k.Synced)
	if err := cp.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	refusedTwice := func() bool { return k.Stats().PodWatchFailures >= 2 }
	waitFor(ctx, t, "two refused pod watches", refusedTwice)
	f := k.WatchFailure()
	if f.Since.IsZero() || !errors.Is(f.Err, syscall.ECONNREFUSED) {
		t.Errorf("watch failure %+v while the API server is down, want a run of connection refused", f)
	}
	if err := cp.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the pod watch reopened", func() bool { return k.WatchFailure().Since.IsZero() })
}

func waitFor(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
