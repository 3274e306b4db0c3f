package kubeletprobe

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sync"
)

// Serve reads Requests from in and writes Responses to out until in ends.
// Each probe runs in its own goroutine; Serve returns after the last one
// has answered.
func Serve(in io.Reader, out io.Writer) error {
	p := newProber()
	w := &responder{enc: json.NewEncoder(out)}
	var running sync.WaitGroup
	defer running.Wait()
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var req Request
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			return fmt.Errorf("decoding request %q: %w", sc.Text(), err)
		}
		if req.Op == OpCounts {
			w.send(p.snapshot(req.ID))
			continue
		}
		running.Add(1)
		go func() {
			defer running.Done()
			w.send(p.probe(req))
		}()
	}
	return sc.Err()
}

// responder serialises responses of concurrent probes onto one stream.
type responder struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (r *responder) send(resp Response) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.enc.Encode(resp) // the agent is gone: nothing left to tell
}
