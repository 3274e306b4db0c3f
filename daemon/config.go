package daemon

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/client-go/rest"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/collector/kernel"
	"github.com/drainwatch/drainwatch/collector/kube"
	"github.com/drainwatch/drainwatch/collector/node"
	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/exporter/otlp"
)

// Defaults of the zero Config fields.
const (
	DefaultTickEvery       = 250 * time.Millisecond
	DefaultCheckpointEvery = 2 * time.Second
	// DefaultKeepCompleted is how long complete terminations stay in the
	// store and the API (the correlator itself keeps them one hour).
	DefaultKeepCompleted = 7 * 24 * time.Hour
	// DefaultCompletedInMemory is how many complete terminations the API
	// serves from memory (older ones are read from the store). 256 covers
	// the last few rollouts of a busy node, what the UI and `timeline
	// --follow` ask for, at a few MiB at most (a termination with its
	// connection points bound full is tens of KiB).
	DefaultCompletedInMemory = 256
	// DefaultPinPath is where `drainwatch run` pins its BPF programs and
	// maps (bpffs), so they keep collecting across a restart.
	DefaultPinPath = "/sys/fs/bpf/drainwatch"
)

// Kernel is the kernel side the daemon drives: *kernel.Kernel, or a fake
// in tests that cannot load BPF.
type Kernel interface {
	node.Watcher
	Events() <-chan collector.Event
	Stats() (kernel.Stats, error)
	Probes() []kernel.ProbeStatus
	// SetProbeComms names the kubelet's tasks, whose accepts the kernel
	// counts as probes (Config.Correlate.ProbeComms).
	SetProbeComms(names []string) error
	Close() error
}

// Config configures one node's daemon.
type Config struct {
	NodeName string
	// Kubeconfig is a kubeconfig path; empty means in-cluster. Rest, when
	// set, is used instead (tests).
	Kubeconfig string
	Rest       *rest.Config
	// ListenAddr serves /metrics, the API and /ui; empty disables it unless
	// Listener is set.
	ListenAddr string
	Listener   net.Listener
	// Auth protects /metrics, /api and /ui (never /healthz and /readyz):
	// AuthKubernetes or AuthNone (empty).
	Auth string
	// TLSCertFile and TLSKeyFile, both set, serve HTTPS with this pair,
	// reloaded when the files change (a renewed Secret); empty: plain HTTP.
	TLSCertFile, TLSKeyFile string
	// TLSSelfSigned serves HTTPS with a certificate generated at start
	// when no files are given.
	TLSSelfSigned bool
	// StateDir holds the bbolt store.
	StateDir string
	// PinPath, a directory on bpffs, keeps the kernel side collecting while
	// the daemon restarts: the programs and maps are pinned under
	// PinPath/<node name> and resumed by the next run on the same state
	// dir. Empty: nothing is pinned (a restart leaves a daemon_down gap).
	// `drainwatch run` defaults to DefaultPinPath.
	PinPath string
	// UnpinOnExit removes the pins at shutdown: the programs detach (for
	// an uninstall, or a test).
	UnpinOnExit bool
	// CgroupRoot is the cgroup2 mount (or a subtree of it) searched for
	// container cgroups, found in /proc/self/mountinfo when empty; ProcRoot
	// is /proc.
	CgroupRoot, ProcRoot string
	Log                  zerolog.Logger
	Correlate            correlate.Config
	// OpenKernel opens the kernel side; nil means kernel.Open.
	OpenKernel func(kernel.Options) (Kernel, error)
	// TickEvery paces the correlator's Tick, scope binding and the API
	// view; CheckpointEvery the store's checkpoints.
	TickEvery, CheckpointEvery time.Duration
	KeepCompleted              time.Duration
	// SeriesTTL is how long a revision's series outlive its last
	// termination (0: exporter.DefaultSeriesTTL).
	SeriesTTL time.Duration
	// CompletedInMemory bounds the complete terminations held in memory
	// for the API (0: DefaultCompletedInMemory); the API reads the others,
	// up to KeepCompleted old, from the store.
	CompletedInMemory int
	// NoEvents turns off the Warning Events posted on pods and workloads
	// for each non-clean termination.
	NoEvents bool
	// OTLP, when set, sends every complete termination and startup to an
	// OpenTelemetry collector as a log record (--otlp-endpoint).
	OTLP *otlp.Config
	// HTTP2Tracking is HTTP2Auto (the default), HTTP2Always or HTTP2Off:
	// when the kernel follows HTTP/2 streams (see http2.go).
	HTTP2Tracking string
	// WatchAllNodes watches every Node, not only this one, so that routing
	// sources on other nodes (their kube-proxy, their pods) are named after
	// their node (kube.Config.AllNodes; a cluster-wide watch).
	WatchAllNodes bool
	// Scope limits the pods observed (kube.PodScope: --namespaces,
	// --exclude-namespaces, --pod-selector); the zero value observes all.
	Scope kube.PodScope
	// RingBufferSize is the kernel ring buffer's size in bytes (0:
	// kernel.DefaultRingBufferSize; see kernel.Options.RingBufferSize).
	RingBufferSize int
	// Now is time.Now when nil.
	Now func() time.Time
}

func (c Config) withDefaults() (Config, error) {
	if c.NodeName == "" {
		return c, errors.New("node name is empty: pass --node-name or set $NODE_NAME (downward API spec.nodeName)")
	}
	if c.StateDir == "" {
		return c, errors.New("state dir is empty: pass --state-dir (a hostPath that survives restarts, e.g. /var/lib/drainwatch)")
	}
	if err := c.checkServing(); err != nil {
		return c, err
	}
	if c.CgroupRoot == "" {
		root, err := node.Cgroup2Mount()
		if err != nil {
			return c, fmt.Errorf("finding the cgroup2 mount (or pass --cgroup-root): %w", err)
		}
		c.CgroupRoot = root
	}
	if c.ProcRoot == "" {
		c.ProcRoot = "/proc"
	}
	if c.OpenKernel == nil {
		c.OpenKernel = func(o kernel.Options) (Kernel, error) { return kernel.Open(o) }
	}
	if c.TickEvery <= 0 {
		c.TickEvery = DefaultTickEvery
	}
	if c.CheckpointEvery <= 0 {
		c.CheckpointEvery = DefaultCheckpointEvery
	}
	if c.KeepCompleted <= 0 {
		c.KeepCompleted = DefaultKeepCompleted
	}
	if c.CompletedInMemory <= 0 {
		c.CompletedInMemory = DefaultCompletedInMemory
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.HTTP2Tracking == "" {
		c.HTTP2Tracking = HTTP2Auto
	}
	if _, err := messageProbesMode(c.HTTP2Tracking); err != nil {
		return c, err
	}
	var err error
	if c.RingBufferSize, err = kernel.RingBufferSize(c.RingBufferSize); err != nil {
		return c, fmt.Errorf("--ring-buffer-size: %w", err)
	}
	return c, nil
}

func (c *Config) checkServing() error {
	switch c.Auth {
	case "":
		c.Auth = AuthNone
	case AuthNone, AuthKubernetes:
	default:
		return fmt.Errorf("--auth %q: want %s or %s", c.Auth, AuthNone, AuthKubernetes)
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return errors.New("--tls-cert-file and --tls-key-file go together: pass both or neither")
	}
	if c.Auth == AuthKubernetes && c.TLSCertFile == "" && !c.TLSSelfSigned {
		c.Log.Warn().Msg("--auth=kubernetes without TLS: bearer tokens travel in clear text; pass --tls-cert-file and --tls-key-file, or --tls-self-signed")
	}
	return nil
}
