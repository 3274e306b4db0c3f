// Package kubeproxy runs the real kube-proxy (v1.37.2, built by `make
// controlplane` from k8s.io/kubernetes) for a testenv node: one process in the
// node's network namespace, programming that namespace's nftables (or
// iptables) rules for every ClusterIP Service, the way it runs on a real node.
//
// Each Proxy has its own --config file (mode, sync periods: the lag knob),
// and serves healthz and metrics on the node namespace's loopback. It reaches
// the API server through a relay on that loopback (netlab.Relay): the API
// server listens on the root namespace's 127.0.0.1, which a process inside
// the node namespace cannot see, and the root namespace has no route to the
// pods, so nothing else connects the two. Its kubeconfig carries the node's
// identity (system:node:<name>, group system:nodes) by impersonation with
// the control plane's admin token.
//
// Clients reach a Service through it with Proxy.Dial: a connection from
// inside the node namespace to the ClusterIP is DNATed by kube-proxy's rules
// to a pod, so a pod's refusal reaches the client as ECONNREFUSED, as it does
// behind kube-proxy in production.
package kubeproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/client-go/rest"

	"github.com/drainwatch/drainwatch/testenv/netlab"
)

// Modes kube-proxy runs in here.
const (
	NFTables = "nftables"
	IPTables = "iptables"
)

// Ports on the node namespace's loopback: each node namespace has its own
// loopback, so every Proxy uses the same ones (kube-proxy's defaults).
const (
	HealthzPort = 10256
	MetricsPort = 10249
	// RelayPort is where the relay to the API server listens.
	RelayPort = 6443
)

// Config configures one kube-proxy.
type Config struct {
	Mode   string     // NFTables or IPTables
	Node   string     // the Node's name (hostnameOverride)
	NS     *netlab.NS // the node's network namespace
	BinDir string     // holds kube-proxy (controlplane.BinDir)
	Dir    string     // config, kubeconfig and log
	// Rest is how the test reaches the API server (its URL, CA and admin
	// token); kube-proxy reaches it through the relay with the same token.
	Rest *rest.Config
	// ClusterCIDR is the pods' network: traffic to a ClusterIP from outside
	// it is masqueraded, as kube-proxy does for node-originated traffic.
	ClusterCIDR string
	// MinSync and Sync are the mode's minSyncPeriod and syncPeriod: how soon
	// after a change kube-proxy may reprogram its rules, and how often it
	// resyncs at the latest. Zero: 0 s (every change at once) and 30 s.
	MinSync, Sync time.Duration
	Log           zerolog.Logger
}

// Proxy is a running kube-proxy.
type Proxy struct {
	cfg   Config
	cmd   *exec.Cmd
	relay *netlab.Relay
	done  chan struct{}
	err   error
}

// Start runs kube-proxy in cfg.NS and returns once its healthz answers (it
// has synced its rules at least once).
func Start(ctx context.Context, cfg Config) (*Proxy, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("kube-proxy %s: state dir: %w", cfg.Node, err)
	}
	p := &Proxy{cfg: cfg, done: make(chan struct{})}
	api, err := url.Parse(cfg.Rest.Host)
	if err != nil {
		return nil, fmt.Errorf("kube-proxy %s: API server URL: %w", cfg.Node, err)
	}
	if p.relay, err = netlab.StartRelay(cfg.NS, net.JoinHostPort("127.0.0.1", fmt.Sprint(RelayPort)), api.Host, cfg.Log); err != nil {
		return nil, fmt.Errorf("kube-proxy %s: %w", cfg.Node, err)
	}
	if err := p.start(); err != nil {
		p.relay.Close()
		return nil, err
	}
	if err := p.waitHealthy(ctx); err != nil {
		_ = p.Stop()
		return nil, err
	}
	cfg.Log.Info().Str("node", cfg.Node).Str("mode", cfg.Mode).Int("pid", p.cmd.Process.Pid).Msg("kube-proxy up")
	return p, nil
}

func (c *Config) validate() error {
	if c.Mode != NFTables && c.Mode != IPTables {
		return fmt.Errorf("kube-proxy: mode %q, want %q or %q", c.Mode, NFTables, IPTables)
	}
	if c.Node == "" || c.NS == nil || c.Rest == nil || c.BinDir == "" || c.Dir == "" {
		return errors.New("kube-proxy: Config.Node, NS, Rest, BinDir and Dir are required")
	}
	if c.Sync == 0 {
		c.Sync = 30 * time.Second
	}
	return nil
}

// start writes the files and runs the binary inside the node namespace. It
// dies with this process (Pdeathsig); Setpgid keeps a terminal's ^C for us.
func (p *Proxy) start() error {
	kubeconfig, err := writeKubeconfig(p.cfg)
	if err != nil {
		return err
	}
	config, err := writeConfig(p.cfg, kubeconfig)
	if err != nil {
		return err
	}
	logPath := filepath.Join(p.cfg.Dir, "kube-proxy.log")
	out, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("kube-proxy %s: opening its log: %w", p.cfg.Node, err)
	}
	p.cmd = exec.Command(filepath.Join(p.cfg.BinDir, "kube-proxy"), "--config", config, "--v=2")
	p.cmd.Stdout, p.cmd.Stderr = out, out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := p.cfg.NS.Start(p.cmd); err != nil {
		out.Close()
		return fmt.Errorf("starting kube-proxy %s: %w", p.cfg.Node, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		out.Close()
		close(p.done)
	}()
	return nil
}

// Node is the node this kube-proxy programs.
func (p *Proxy) Node() string { return p.cfg.Node }

// Mode is NFTables or IPTables.
func (p *Proxy) Mode() string { return p.cfg.Mode }

// Log is the path of kube-proxy's own log.
func (p *Proxy) Log() string { return filepath.Join(p.cfg.Dir, "kube-proxy.log") }

// Dial connects from inside the node namespace, where kube-proxy's rules
// apply: a ClusterIP:port is DNATed to one of the Service's endpoints. addr
// must be a literal IP and port.
func (p *Proxy) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	return p.cfg.NS.Dial(ctx, network, addr)
}

// Stop ends kube-proxy (SIGTERM, SIGKILL after 5 s) and the relay. Its rules
// stay in the node namespace until the namespace goes.
func (p *Proxy) Stop() error {
	defer p.relay.Close()
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stopping kube-proxy %s: %w", p.cfg.Node, err)
	}
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	return nil
}

// exited reports kube-proxy's exit, if it has exited.
func (p *Proxy) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("kube-proxy %s exited: %v (log %s)", p.cfg.Node, p.err, p.Log())
	default:
		return nil
	}
}
