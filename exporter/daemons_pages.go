package exporter

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// maxListPages bounds the pages one list follows: 1,000 of MaxPageSize is
// far more than a node keeps within its TTL.
const maxListPages = 1000

// pageReader asks a daemon for one page of terminations.
type pageReader func(ctx context.Context, q url.Values) (TerminationList, error)

// allPages reads every page of the list q asks for, MaxPageSize
// terminations at a time, following continue: one list, as a daemon
// answered it before it paged.
func allPages(ctx context.Context, q url.Values, read pageReader) (TerminationList, error) {
	q = maps.Clone(q)
	if q.Get("limit") == "" {
		q.Set("limit", strconv.Itoa(MaxPageSize))
	}
	var all TerminationList
	for range maxListPages {
		page, err := read(ctx, q)
		if err != nil {
			return all, err
		}
		all.Terminations = append(all.Terminations, page.Terminations...)
		if page.Continue == "" {
			return all, nil
		}
		if page.Continue == q.Get("continue") {
			return all, errors.New("the daemon answered the same continue token twice")
		}
		q.Set("continue", page.Continue)
	}
	return all, fmt.Errorf("more than %d pages of terminations: narrow the query (namespace, since)", maxListPages)
}

// maxThrottledRetries bounds the retries of a page answered 429, and
// maxRetryAfter the wait before each.
const (
	maxThrottledRetries = 5
	maxRetryAfter       = 10 * time.Second
)

// retryThrottled reads a page, again after the daemon's Retry-After while
// it answers 429 (its lists are busy), at most maxThrottledRetries times.
func retryThrottled[L any](ctx context.Context, read func() (L, time.Duration, error)) (L, error) {
	for attempt := 0; ; attempt++ {
		list, wait, err := read()
		if wait == 0 || attempt == maxThrottledRetries {
			return list, err
		}
		select {
		case <-ctx.Done():
			return list, fmt.Errorf("%w (%w)", err, ctx.Err())
		case <-time.After(wait):
		}
	}
}

// throttledWait is how long a 429 answer asks to wait (its Retry-After in
// seconds, 1 s without one, at most maxRetryAfter), 0 for any other.
func throttledWait(resp *http.Response) time.Duration {
	if resp.StatusCode != http.StatusTooManyRequests {
		return 0
	}
	s, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil || s < 1 {
		return time.Second
	}
	return min(time.Duration(s)*time.Second, maxRetryAfter)
}
