package l7

import (
	"context"
	"io"
	"net/http"
	"time"
)

// Alternate is the client of the keep-alive race: a request, then Rounds
// rounds of one after Short (the pooled upstream connection is alive) and
// one after Long (the pod's server has closed it, when its idle timeout is
// shorter). Before round At it calls Between (a rollout, say). Its count
// and duration are bounded by Rounds × (Short + Long).
type Alternate struct {
	Client      *http.Client
	URL         string
	Rounds      int
	Short, Long time.Duration
	At          int
	Between     func(context.Context) error
}

// Observed is what the client saw: statuses and transport errors.
type Observed struct {
	Status map[int]int
	Errs   []error
}

// Run sends the requests; an error from Between ends it.
func (a Alternate) Run(ctx context.Context) (Observed, error) {
	o := Observed{Status: map[int]int{}}
	o.get(ctx, a.Client, a.URL)
	for round := range a.Rounds {
		if round == a.At && a.Between != nil {
			if err := a.Between(ctx); err != nil {
				return o, err
			}
		}
		for _, gap := range []time.Duration{a.Short, a.Long} {
			select {
			case <-ctx.Done():
				return o, ctx.Err()
			case <-time.After(gap):
			}
			o.get(ctx, a.Client, a.URL)
		}
	}
	return o, nil
}

func (o *Observed) get(ctx context.Context, hc *http.Client, url string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err == nil {
		var resp *http.Response
		if resp, err = hc.Do(req); err == nil {
			// Read to the end: an unread body closes the connection
			// instead of returning it to the client's pool.
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err == nil {
				o.Status[resp.StatusCode]++
				return
			}
		}
	}
	o.Errs = append(o.Errs, err)
}
