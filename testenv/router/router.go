// Package router is testenv's load balancer: it follows a Service's
// EndpointSlices through an informer and applies each change only after a
// configurable propagation delay, sending each new TCP connection round-robin
// to the ready endpoints it currently knows. It is the balancer "not yet
// notified" of the seeds: during the delay, new connections still go to a pod
// that is terminating. It proxies in userspace (accept, pick, dial, splice),
// or with Config.KeepAlive as an HTTP reverse proxy with a connection pool,
// and records which backend every connection (request) went to.
package router

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/client-go/kubernetes"
)

// Config configures a Router.
type Config struct {
	Client    kubernetes.Interface
	Namespace string
	Service   string
	PortName  string        // EndpointSlice port name; the first port when empty
	Delay     time.Duration // propagation delay applied to every change
	// Listener accepts client connections, e.g. netlab's NS.Listen in the
	// fabric namespace.
	Listener net.Listener
	// Dial opens backend connections, e.g. netlab's NS.Dial from the fabric.
	Dial        func(ctx context.Context, network, addr string) (net.Conn, error)
	DialTimeout time.Duration // 1 s when zero
	// KeepAlive turns on keep-alive pooling: the router becomes an HTTP/1.1
	// reverse proxy that picks a backend per request and reuses idle backend
	// connections. Off, it is a TCP proxy picking per connection.
	KeepAlive bool
	Log       zerolog.Logger
}

// Router is a running router.
type Router struct {
	cfg   Config
	log   zerolog.Logger
	table *Table
	wg    sync.WaitGroup

	mu    sync.Mutex
	conns []Conn
}

// Start syncs the EndpointSlice informer, applies the initial endpoint set and
// starts accepting. Everything stops when ctx ends; Wait waits for that.
func Start(ctx context.Context, cfg Config) (*Router, error) {
	if cfg.Client == nil || cfg.Listener == nil || cfg.Dial == nil || cfg.Service == "" {
		return nil, errors.New("router: Client, Listener, Dial and Service are required")
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = time.Second
	}
	r := &Router{cfg: cfg, table: NewTable(cfg.Delay),
		log: cfg.Log.With().Str("service", cfg.Namespace+"/"+cfg.Service).Logger()}
	if err := r.watchSlices(ctx); err != nil {
		return nil, fmt.Errorf("starting router: %w", err)
	}
	r.wg.Add(2)
	go func() { defer r.wg.Done(); r.table.Run(ctx) }()
	go func() {
		defer r.wg.Done()
		if cfg.KeepAlive {
			r.serveHTTP(ctx)
			return
		}
		r.serve(ctx)
	}()
	go func() { <-ctx.Done(); cfg.Listener.Close() }()
	r.log.Info().Str("addr", r.Addr()).Dur("delay", cfg.Delay).Bool("keepalive", cfg.KeepAlive).Strs("backends", r.table.Backends()).Msg("router started")
	return r, nil
}

// Addr is the address clients connect to.
func (r *Router) Addr() string { return r.cfg.Listener.Addr().String() }

// Wait waits until the router has stopped (its context ended) and every
// proxied connection has ended.
func (r *Router) Wait() { r.wg.Wait() }

// Backends is the endpoint set new connections currently go to.
func (r *Router) Backends() []string { return r.table.Backends() }

// Changes lists every endpoint set observed, with when it was applied.
func (r *Router) Changes() []Change { return r.table.Changes() }

// Conns lists every accepted connection in accept order of their decision.
func (r *Router) Conns() []Conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.conns)
}

func (r *Router) record(c Conn) int {
	r.mu.Lock()
	r.conns = append(r.conns, c)
	i := len(r.conns) - 1
	r.mu.Unlock()
	r.log.Debug().Str("client", c.Client).Str("backend", c.Backend).Str("outcome", c.Outcome).Msg("connection")
	return i
}

// markBackendEnd notes how the backend ended record i's connection.
func (r *Router) markBackendEnd(i int, reset, silent bool) {
	r.mu.Lock()
	r.conns[i].BackendReset, r.conns[i].BackendSilent = reset, silent
	r.mu.Unlock()
}
