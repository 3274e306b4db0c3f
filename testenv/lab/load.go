package lab

import (
	"context"
	"sync"
	"time"

	"github.com/drainwatch/drainwatch/testenv/client"
)

// Constant load for the rolling update: one-second open-loop segments,
// started back to back until stopped, of /work every 20 ms and a /slow of
// 1.5 s every 250 ms (the longer requests real services have: a naive pod
// finishing them stays up, listener closed, while routing catches up); at
// most maxSegments of them, so the load is bounded in count and time even
// if the lab hangs.
const (
	segment      = time.Second
	loadInterval = 20 * time.Millisecond
	slowInterval = 250 * time.Millisecond
	slowPath     = "/slow?ms=1500"
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
		for _, l := range []client.Load{
			{Dial: dial, Target: target, Path: "/work", Interval: loadInterval,
				Count: int(segment / loadInterval), Duration: segment, Timeout: 2 * time.Second},
			{Dial: dial, Target: target, Path: slowPath, Interval: slowInterval,
				Count: int(segment / slowInterval), Duration: segment, Timeout: 4 * time.Second},
		} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cl.add(l.Run(ctx))
			}()
		}
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

func (cl *constantLoad) add(reqs []client.Request, _ error) {
	cl.mu.Lock()
	cl.reqs = append(cl.reqs, reqs...)
	cl.mu.Unlock()
}

// Stop ends the load after the current segment and returns every request.
func (cl *constantLoad) Stop() []client.Request {
	close(cl.stop)
	<-cl.done
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.reqs
}
