package l7

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/client-go/kubernetes"

	"github.com/drainwatch/drainwatch/testenv/netlab"
	"github.com/drainwatch/drainwatch/testenv/router"
)

// Kind is which proxy runs.
type Kind string

// The proxies.
const (
	HAProxy Kind = "haproxy"
	Nginx   Kind = "nginx"
)

// Retry is the proxy's retry policy for failed upstream requests.
type Retry int

const (
	// RetryDefault spells out each proxy's shipped default (see the package
	// comment): nginx retries idempotent requests on another server, haproxy
	// retries failed connects only.
	RetryDefault Retry = iota
	// RetryNone never retries: every upstream failure answers the client.
	RetryNone
	// RetryEmptyResponse also retries a request the server closed or reset
	// without answering: haproxy `retry-on conn-failure empty-response`
	// with `option redispatch` (an L7 retry, logged as a retry); nginx
	// already does for idempotent requests, so it is nginx's default there.
	RetryEmptyResponse
)

// Config configures a proxy.
type Config struct {
	Kind      Kind
	Client    kubernetes.Interface
	Namespace string // the Service's namespace
	Service   string
	PortName  string     // EndpointSlice port name; the first port when empty
	NetNS     *netlab.NS // where the proxy runs and listens (the cluster's fabric)
	Dir       string     // config, sockets and logs
	// IdleTimeout is how long a pooled upstream connection may stay idle:
	// nginx's keepalive_timeout closes each one idle that long; haproxy has
	// no per-connection idle timeout for its pool, this sets its
	// pool-purge-delay, the period at which it closes the idle connections
	// it has not needed lately (some, not all). 60 s when zero. Longer than
	// the pods' server idle timeout, it sets up the keep-alive race.
	IdleTimeout time.Duration
	Retry       Retry
	Log         zerolog.Logger
}

// Update is one backend set the proxy was told about.
type Update struct {
	Seen     time.Time // the EndpointSlice informer delivered it
	Applied  time.Time // the proxy confirmed it: haproxy's runtime API answered; nginx's new worker started and the old one exited
	Backends []string  // ready "ip:port", sorted
}

// Proxy is a running proxy.
type Proxy struct {
	cfg    Config
	addr   string
	cmd    *exec.Cmd
	exited chan struct{}
	engine engine
	cancel context.CancelFunc

	mu      sync.Mutex
	updates []Update
}

// engine is what differs between haproxy and nginx.
type engine interface {
	start(initial []string) (*exec.Cmd, error)
	apply(backends []string) error
	counts() (Counts, error)
	stop(cmd *exec.Cmd) error
}

// Start writes the proxy's config for the Service's ready endpoints, starts
// it in cfg.NetNS and keeps its backends following the EndpointSlices until
// Close.
func Start(ctx context.Context, cfg Config) (*Proxy, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	port, err := freePort(cfg.NetNS)
	if err != nil {
		return nil, err
	}
	p := &Proxy{cfg: cfg, addr: fmt.Sprintf("127.0.0.1:%d", port), exited: make(chan struct{})}
	p.engine = p.newEngine()
	ctx, p.cancel = context.WithCancel(ctx)
	f := router.Follow{Client: cfg.Client, Namespace: cfg.Namespace, Service: cfg.Service, PortName: cfg.PortName}
	var startErr error
	err = router.FollowReady(ctx, f, func(set []string, initial bool) {
		if initial {
			startErr = p.launch(set)
			return
		}
		p.update(set)
	})
	if err == nil {
		err = startErr
	}
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("starting %s for %s/%s: %w", cfg.Kind, cfg.Namespace, cfg.Service, err)
	}
	return p, nil
}

func (c *Config) defaults() error {
	if c.Client == nil || c.NetNS == nil || c.Service == "" || c.Dir == "" {
		return errors.New("l7: Client, NetNS, Service and Dir are required")
	}
	if c.Kind != HAProxy && c.Kind != Nginx {
		return fmt.Errorf("l7: unknown proxy kind %q", c.Kind)
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = time.Minute
	}
	return os.MkdirAll(c.Dir, 0o755)
}

func (p *Proxy) newEngine() engine {
	if p.cfg.Kind == Nginx {
		return &nginx{cfg: p.cfg, addr: p.addr}
	}
	return &haproxy{cfg: p.cfg, addr: p.addr}
}

// launch starts the proxy process with the initial backends and waits until
// it accepts connections.
func (p *Proxy) launch(initial []string) error {
	now := time.Now()
	cmd, err := p.engine.start(initial)
	if err != nil {
		return err
	}
	p.cmd = cmd
	go func() { _ = cmd.Wait(); close(p.exited) }()
	if err := p.waitListening(); err != nil {
		return err
	}
	p.record(Update{Seen: now, Applied: time.Now(), Backends: initial})
	p.cfg.Log.Info().Str("proxy", string(p.cfg.Kind)).Str("addr", p.addr).Strs("backends", initial).Msg("l7 proxy started")
	return nil
}

// update applies a new backend set; a failure is logged and recorded as an
// update never applied (zero Applied), which a test sees in Updates.
func (p *Proxy) update(set []string) {
	u := Update{Seen: time.Now(), Backends: set}
	if err := p.engine.apply(set); err != nil {
		p.cfg.Log.Error().Err(err).Str("proxy", string(p.cfg.Kind)).Strs("backends", set).Msg("l7 proxy update failed")
	} else {
		u.Applied = time.Now()
	}
	p.record(u)
}

func (p *Proxy) record(u Update) {
	p.mu.Lock()
	p.updates = append(p.updates, u)
	p.mu.Unlock()
}

// Addr is the address clients in the proxy's namespace connect to.
func (p *Proxy) Addr() string { return p.addr }

// Updates lists every backend set the proxy was given, the initial one first.
func (p *Proxy) Updates() []Update {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.updates)
}

// Backends is the last backend set applied.
func (p *Proxy) Backends() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.updates) - 1; i >= 0; i-- {
		if !p.updates[i].Applied.IsZero() {
			return slices.Clone(p.updates[i].Backends)
		}
	}
	return nil
}

// Counts parses the proxy's logs as they are now. A proxy writes a request's
// log line once the request has ended, possibly just after the client got
// the response: read them after Close for a final count.
func (p *Proxy) Counts() (Counts, error) { return p.engine.counts() }

// Close stops following the Service and stops the proxy (its logs stay).
func (p *Proxy) Close() error {
	p.cancel()
	if p.cmd == nil || p.cmd.Process == nil {
		return nil
	}
	err := p.engine.stop(p.cmd)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	return err
}
