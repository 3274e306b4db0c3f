package exporter

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
)

// QueryParallelism bounds the daemons QueryDaemons asks at once: a cluster
// of hundreds of nodes answers within a few round trips, without opening
// hundreds of proxied connections through the API server at once.
const QueryParallelism = 16

// Timeline is what the daemons answered to one filter: both ends of a
// rollout, the terminations of the old pods and, when asked, the startups
// of the new ones. Its JSON is `drainwatch timeline -o json`'s document:
// the terminations as a TerminationList has them, and startups beside them
// when they were asked (an empty list when none matched).
type Timeline struct {
	Terminations []TerminationView `json:"terminations"`
	Startups     []StartupView     `json:"startups,omitzero"`
	// Answered is how many daemons listed their terminations.
	Answered int `json:"-"`
	// NoStartups names the daemons that answered the terminations but not
	// the startups: too old to serve them (ErrStartupsNotServed).
	NoStartups []string `json:"-"`
	// TruncatedStartups names the daemons that held more matching startups
	// than one list of theirs carries (MaxPageSize): the latest are listed.
	TruncatedStartups []string `json:"-"`
}

// QueryDaemons asks every daemon for the terminations matching f, at most
// QueryParallelism at once, and merges the answers by start time. Daemons
// that fail are returned as errors (in the order of ds); the others'
// terminations are still returned.
func QueryDaemons(ctx context.Context, ds []Daemon, f Filter) ([]TerminationView, []error) {
	tl, errs := QueryTimeline(ctx, ds, f, false)
	return tl.Terminations, errs
}

// QueryTimeline asks every daemon, at most QueryParallelism at once, for
// the terminations matching f and, with startups, then for the startups it
// matches; it merges the answers (terminations by start, startups by
// creation). Errors are in the order of ds, at most one a daemon: a daemon
// whose terminations fail is not asked for its startups, and one that is
// too old to serve them is named in NoStartups, not an error.
func QueryTimeline(ctx context.Context, ds []Daemon, f Filter, startups bool) (Timeline, []error) {
	answers := make([]daemonAnswer, len(ds))
	eachDaemon(ds, func(i int, d Daemon) { answers[i] = askDaemon(ctx, d, f.Query(), startups) })
	var tl Timeline
	if startups {
		tl.Startups = []StartupView{}
	}
	var failed []error
	for i, a := range answers {
		if err := tl.add(ds[i].Name(), a); err != nil {
			failed = append(failed, &DaemonError{Daemon: ds[i].Name(), Err: err})
		}
	}
	sortViews(tl.Terminations)
	sortStartups(tl.Startups)
	return tl, failed
}

// DaemonError is a daemon that did not answer: the errors QueryTimeline,
// QueryDaemons and QueryStartups return.
type DaemonError struct {
	Daemon string // its Name
	Err    error
}

func (e *DaemonError) Error() string { return fmt.Sprintf("daemon %s: %v", e.Daemon, e.Err) }
func (e *DaemonError) Unwrap() error { return e.Err }

// daemonAnswer is one daemon's answers, the terminations' and the
// startups' errors apart.
type daemonAnswer struct {
	terminations TerminationList
	startups     *StartupList // nil: not asked
	err          error
	startupsErr  error
}

func askDaemon(ctx context.Context, d Daemon, q url.Values, startups bool) daemonAnswer {
	var a daemonAnswer
	if a.terminations, a.err = d.Terminations(ctx, q); a.err != nil || !startups {
		return a
	}
	list, err := d.Startups(ctx, q)
	a.startups, a.startupsErr = &list, err
	return a
}

// add merges one daemon's answers, and returns the error to report.
func (tl *Timeline) add(daemon string, a daemonAnswer) error {
	if a.err != nil {
		return a.err
	}
	tl.Answered++
	tl.Terminations = append(tl.Terminations, a.terminations.Terminations...)
	switch {
	case a.startups == nil:
	case errors.Is(a.startupsErr, ErrStartupsNotServed):
		tl.NoStartups = append(tl.NoStartups, daemon)
	case a.startupsErr != nil:
		return fmt.Errorf("startups: %w", a.startupsErr)
	default:
		for _, s := range a.startups.Startups {
			tl.Startups = append(tl.Startups, StartupView{Startup: s, Daemon: daemon})
		}
		if a.startups.Truncated {
			tl.TruncatedStartups = append(tl.TruncatedStartups, daemon)
		}
	}
	return nil
}

// eachDaemon calls ask with every daemon, at most QueryParallelism at once,
// and returns when every call has.
func eachDaemon(ds []Daemon, ask func(i int, d Daemon)) {
	sem := make(chan struct{}, QueryParallelism)
	var wg sync.WaitGroup
	for i, d := range ds {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			ask(i, d)
		}()
	}
	wg.Wait()
}
