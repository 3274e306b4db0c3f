package exporter

import (
	"cmp"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Limits bound what one client, or many, can make the server hold: how
// long a connection may take to send a request, to read the answer or to
// sit idle, how large its headers may be, and how many lists (the API's,
// /ui) are built at once.
type Limits struct {
	ReadHeader, Read, Write, Idle time.Duration
	MaxHeaderBytes                int
	// Lists is how many list requests are served at once; more get 429.
	Lists int
}

// DefaultLimits are the daemon's. Its clients (Prometheus, the kubelet's
// probes, `drainwatch timeline`, the API server's proxy) send a request at
// once, without a body, and read the answer as fast as it comes.
var DefaultLimits = Limits{
	// A request is its headers: seconds are generous on any network.
	ReadHeader: 5 * time.Second,
	Read:       10 * time.Second,
	// The largest answers, a full page or /ui, are a few MiB: 30 s is
	// ~100 KiB/s, and a reader slower than that holds its page no longer.
	Write: 30 * time.Second,
	// Longer than the usual 30 s scrape interval, so that Prometheus keeps
	// its connection (and TLS session); an abandoned one goes in a minute.
	Idle: 60 * time.Second,
	// A bearer token is the largest header: a ServiceAccount's is ~1 KiB,
	// an OIDC token with groups a few; 16 KiB holds it twice, where Go's
	// default (1 MiB) lets each slow connection hold a megabyte.
	MaxHeaderBytes: 16 << 10,
	// One per client that lists at a time (timeline asks each daemon once);
	// each holds a page (MaxPageSize terminations) while it writes it.
	Lists: 4,
}

// withDefaults fills zero fields from DefaultLimits.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	l.ReadHeader = cmp.Or(l.ReadHeader, d.ReadHeader)
	l.Read = cmp.Or(l.Read, d.Read)
	l.Write = cmp.Or(l.Write, d.Write)
	l.Idle = cmp.Or(l.Idle, d.Idle)
	l.MaxHeaderBytes = cmp.Or(l.MaxHeaderBytes, d.MaxHeaderBytes)
	l.Lists = cmp.Or(l.Lists, d.Lists)
	return l
}

func (l Limits) server(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: l.ReadHeader, ReadTimeout: l.Read,
		WriteTimeout: l.Write, IdleTimeout: l.Idle, MaxHeaderBytes: l.MaxHeaderBytes}
}

// ReadOnly answers 413 to a request with a body, and closes its
// connection: every route is a GET, and a body declared but never sent
// would otherwise hold the connection until the read timeout while the
// server tried to read past it.
func ReadOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 {
			w.Header().Set("Connection", "close")
			http.Error(w, "this API is read-only: a request has no body", http.StatusRequestEntityTooLarge)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// listGate bounds the list requests served at once.
type listGate struct {
	slots     chan struct{}
	throttled func()
}

func newListGate(n int, throttled func()) *listGate {
	return &listGate{slots: make(chan struct{}, n), throttled: throttled}
}

// retryAfter is the Retry-After of a 429, in seconds: a list takes well
// under a second to build.
const retryAfter = 1

// wrap serves h when a slot is free, and 429 with Retry-After otherwise.
func (g *listGate) wrap(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case g.slots <- struct{}{}:
			defer func() { <-g.slots }()
			h(w, r)
		default:
			g.throttled()
			w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
			http.Error(w, fmt.Sprintf("%d lists are being served: retry after %d s", cap(g.slots), retryAfter), http.StatusTooManyRequests)
		}
	}
}
