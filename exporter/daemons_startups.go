package exporter

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/drainwatch/drainwatch/correlate"
)

// ErrStartupsNotServed is what a daemon older than GET /api/v1/startups
// answers it (404): its new pods cannot be listed, its terminations can.
var ErrStartupsNotServed = errors.New("the daemon does not serve /api/v1/startups (a drainwatch older than this one)")

// StartupView is a new pod's startup as `drainwatch timeline` lists it: the
// record and the daemon that answered it, since a startup names no node.
type StartupView struct {
	correlate.Startup
	Daemon string `json:"daemon"`
}

// startupsQuery is q asking for the most startups one list holds: the
// startups API has no continue, its limit is a page's.
func startupsQuery(q url.Values) url.Values {
	q = maps.Clone(q)
	if q == nil {
		q = url.Values{}
	}
	if q.Get("limit") == "" {
		q.Set("limit", strconv.Itoa(MaxPageSize))
	}
	return q
}

// Startups reads the daemon's startups list.
func (d urlDaemon) Startups(ctx context.Context, q url.Values) (StartupList, error) {
	u := d.base + "/api/v1/startups?" + startupsQuery(q).Encode()
	body, err := retryThrottled(ctx, func() ([]byte, time.Duration, error) { return d.get(ctx, u) })
	if se := (*statusError)(nil); errors.As(err, &se) && se.code == http.StatusNotFound {
		return StartupList{}, fmt.Errorf("%w: %w", ErrStartupsNotServed, err)
	}
	if err != nil {
		return StartupList{}, err
	}
	return decodeList[StartupList](body, "startups", u)
}

// Startups reads the daemon's startups list through the pod proxy.
func (d proxyDaemon) Startups(ctx context.Context, q url.Values) (StartupList, error) {
	body, err := d.get(ctx, "api/v1/startups", startupsQuery(q))
	if daemonNotFound(err) {
		return StartupList{}, fmt.Errorf("%w: %w", ErrStartupsNotServed, err)
	}
	if err != nil {
		return StartupList{}, err
	}
	return decodeList[StartupList](body, "startups", d.Name())
}

// daemonNotFound reports whether a pod-proxy error is the daemon's own 404:
// client-go marks a body that is not the API server's Status (the daemon's
// "404 page not found") as an unexpected response, where the API server's
// 404 (the pod is gone) is a Status of its own.
func daemonNotFound(err error) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) || st.Status().Code != http.StatusNotFound || st.Status().Details == nil {
		return false
	}
	return slices.ContainsFunc(st.Status().Details.Causes, func(c metav1.StatusCause) bool {
		return c.Type == metav1.CauseTypeUnexpectedServerResponse
	})
}

// QueryStartups asks every daemon, at most QueryParallelism at once, for
// the startups matching f alone (QueryTimeline asks for the terminations
// first) and merges them by creation. Errors are *DaemonError, in the order
// of ds; a daemon too old to serve startups is one (ErrStartupsNotServed).
// truncated names the daemons whose list held only their latest.
func QueryStartups(ctx context.Context, ds []Daemon, f Filter) (startups []StartupView, truncated []string, failed []error) {
	lists := make([]StartupList, len(ds))
	errs := make([]error, len(ds))
	eachDaemon(ds, func(i int, d Daemon) { lists[i], errs[i] = d.Startups(ctx, f.Query()) })
	startups = []StartupView{}
	for i, d := range ds {
		if errs[i] != nil {
			failed = append(failed, &DaemonError{Daemon: d.Name(), Err: errs[i]})
			continue
		}
		for _, s := range lists[i].Startups {
			startups = append(startups, StartupView{Startup: s, Daemon: d.Name()})
		}
		if lists[i].Truncated {
			truncated = append(truncated, d.Name())
		}
	}
	sortStartups(startups)
	return startups, truncated, failed
}

// sortStartups orders the merged startups of several daemons by their
// origin (the pod's creation), then namespace, pod and uid: the oldest
// first, as the terminations are listed.
func sortStartups(vs []StartupView) {
	slices.SortStableFunc(vs, func(a, b StartupView) int {
		return cmp.Or(startupOrigin(a.Startup).Compare(startupOrigin(b.Startup)),
			cmp.Compare(a.Workload.Namespace, b.Workload.Namespace), cmp.Compare(a.Pod, b.Pod), cmp.Compare(a.PodUID, b.PodUID))
	})
}
