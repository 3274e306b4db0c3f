package lab

import (
	"context"
	"sync"
	"time"

	"github.com/drainwatch/drainwatch/testenv/client"
)

// Constant load for the rolling update: one-second open-loop segments of
// /work every 20 ms, started back to back, until stopped; at most
// maxSegments of them, so the load is bounded in count and time even if
// the lab hangs.
const (
	segment      = time.Second
	loadInterval = 20 * time.Millisecond
	maxSegments  = 150
)

// constantLoad is a running constant load.
type constantLoad struct {
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	reqs []client.Request
}

// startLoad sends /work to target until Stop.
func startLoad(ctx context.Context, dial client.DialFunc, target string) *constantLoad {
	cl := &constantLoad{stop: make(chan struct{}), done: make(chan struct{})}
	go cl.run(ctx, dial, target)
	return cl
}

func (cl *constantLoad) run(ctx context.Context, dial client.DialFunc, target string) {
	defer close(cl.done)
	var wg sync.WaitGroup
	tick := time.NewTicker(segment)
	defer tick.Stop()
	for range maxSegments {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := client.Load{Dial: dial, Target: target, Path: "/work", Interval: loadInterval,
				Count: int(segment / loadInterval), Duration: segment, Timeout: 2 * time.Second}
			reqs, _ := l.Run(ctx)
			cl.mu.Lock()
			cl.reqs = append(cl.reqs, reqs...)
			cl.mu.Unlock()
		}()
		select {
		case <-tick.C:
			continue
		case <-cl.stop:
		case <-ctx.Done():
		}
		break
	}
	wg.Wait()
}

// Stop ends the load after the current segment and returns every request.
func (cl *constantLoad) Stop() []client.Request {
	close(cl.stop)
	<-cl.done
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.reqs
}
