package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/drainwatch/drainwatch/collector/kube"
	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/daemon"
	"github.com/drainwatch/drainwatch/exporter"
	"github.com/drainwatch/drainwatch/exporter/otlp"
)

// runFlags are `drainwatch run`'s settings; each flag defaults to an
// environment variable so a DaemonSet can set them from the downward API.
type runFlags struct {
	nodeName, kubeconfig, listen, stateDir, cgroupRoot string
	pinPath                                            string
	logLevel, logFormat                                string
	kubeletComms                                       string
	namespaces, excludeNamespaces, podSelector         string
	startupWindow, blackholeWindow                     time.Duration
	http2Tracking, auth, tlsCert, tlsKey               string
	ringBufferSize, pprofAddr, completedInMemory       string
	keepCompleted, seriesTTL                           string
	otlpEndpoint, otlpProtocol, otlpHeaders, otlpCA    string
	otlpInsecure                                       bool
	noEvents, unpinOnExit, tlsSelfSigned, allNodes     bool
}

// runFlagSet builds `drainwatch run`'s flags into f without parsing
// them (commands.go lists it for the CLI reference).
func runFlagSet(f *runFlags, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("drainwatch run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.nodeName, "node-name", os.Getenv("NODE_NAME"), "this node's name (env NODE_NAME, from the downward API spec.nodeName)")
	fs.StringVar(&f.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file; empty means in-cluster config (env KUBECONFIG)")
	fs.StringVar(&f.listen, "listen", envOr("DRAINWATCH_LISTEN", ":9090"), "address serving /metrics, /api/v1/terminations and /ui; empty disables (env DRAINWATCH_LISTEN)")
	fs.StringVar(&f.stateDir, "state-dir", envOr("DRAINWATCH_STATE_DIR", "/var/lib/drainwatch"), "directory of the state store, kept across restarts (env DRAINWATCH_STATE_DIR)")
	fs.StringVar(&f.cgroupRoot, "cgroup-root", os.Getenv("DRAINWATCH_CGROUP_ROOT"), "cgroup2 mount (or subtree) holding the pods' cgroups; empty: found in /proc/self/mountinfo (env DRAINWATCH_CGROUP_ROOT)")
	fs.StringVar(&f.pinPath, "pin-path", envOr("DRAINWATCH_PIN_PATH", daemon.DefaultPinPath), "bpffs directory where the eBPF programs stay attached across restarts (under <pin-path>/<node>); empty: nothing pinned, a restart leaves a gap (env DRAINWATCH_PIN_PATH)")
	fs.BoolVar(&f.unpinOnExit, "unpin-on-exit", os.Getenv("DRAINWATCH_UNPIN_ON_EXIT") == "true", "remove the pins at exit so the programs detach (uninstall; see also drainwatch cleanup) (env DRAINWATCH_UNPIN_ON_EXIT=true)")
	fs.StringVar(&f.logLevel, "log-level", envOr("DRAINWATCH_LOG_LEVEL", "info"), "debug, info, warn or error (env DRAINWATCH_LOG_LEVEL)")
	fs.StringVar(&f.logFormat, "log-format", envOr("DRAINWATCH_LOG_FORMAT", "json"), "json or console (env DRAINWATCH_LOG_FORMAT)")
	fs.BoolVar(&f.noEvents, "no-events", os.Getenv("DRAINWATCH_NO_EVENTS") == "true", "do not post Warning Events on pods and workloads (env DRAINWATCH_NO_EVENTS=true)")
	fs.DurationVar(&f.startupWindow, "startup-window", time.Minute, "how long after a new pod is Ready its refused and reset connections count as its startup's (refused_after_ready, reset_after_ready)")
	fs.DurationVar(&f.blackholeWindow, "blackhole-window", 10*time.Second, "how long after a pod is gone from the API, or after the last blackholed attempt, whichever is later, the SYNs to its former address that the node drops still count as its blackholed connections (connections_blackholed); its termination completes no earlier. Longer than the node's neighbour resolution (3 s by default)")
	fs.StringVar(&f.kubeletComms, "kubelet-comm", envOr("DRAINWATCH_KUBELET_COMM", "kubelet"), "comma-separated command names (as /proc/<pid>/comm shows them) of this node's kubelet: connections such a process of the node opens to a pod are probes, reported apart from client traffic (env DRAINWATCH_KUBELET_COMM)")
	fs.StringVar(&f.http2Tracking, "http2-tracking", envOr("DRAINWATCH_HTTP2_TRACKING", daemon.HTTP2Auto), "when the kernel follows HTTP/2 streams with per-message probes (Linux >= 6.3): auto (while a pod of the node declares a container port named grpc*, h2c* or http2*), always, or off; otherwise HTTP/2 connections are judged by their socket's state like any other (env DRAINWATCH_HTTP2_TRACKING)")
	fs.StringVar(&f.auth, "auth", envOr("DRAINWATCH_AUTH", daemon.AuthNone), "none, or kubernetes: /metrics, /api and /ui need a bearer token the API server accepts (TokenReview) and RBAC allowing the read (SubjectAccessReview: GET /metrics, get/list terminations.drainwatch.io); /api and /ui only a token bound to the drainwatch audience, /metrics the API server's audience too; /healthz and /readyz stay open (env DRAINWATCH_AUTH)")
	fs.StringVar(&f.tlsCert, "tls-cert-file", os.Getenv("DRAINWATCH_TLS_CERT_FILE"), "serve HTTPS with this certificate (PEM), reloaded when it changes; empty: plain HTTP (env DRAINWATCH_TLS_CERT_FILE)")
	fs.BoolVar(&f.tlsSelfSigned, "tls-self-signed", os.Getenv("DRAINWATCH_TLS_SELF_SIGNED") == "true", "without --tls-cert-file, serve HTTPS with a certificate generated at start (clients skip its verification) (env DRAINWATCH_TLS_SELF_SIGNED=true)")
	fs.StringVar(&f.tlsKey, "tls-key-file", os.Getenv("DRAINWATCH_TLS_KEY_FILE"), "the key of --tls-cert-file (env DRAINWATCH_TLS_KEY_FILE)")
	fs.StringVar(&f.ringBufferSize, "ring-buffer-size", envOr("DRAINWATCH_RING_BUFFER_SIZE", "2Mi"), "size of the kernel's event ring buffer, a power of two (e.g. 1Mi, 2Mi, 4Mi); it is resident twice in the daemon's memory, and holds the events of terminating pods until the reader takes them (env DRAINWATCH_RING_BUFFER_SIZE)")
	fs.StringVar(&f.pprofAddr, "pprof-addr", os.Getenv("DRAINWATCH_PPROF_ADDR"), "serve Go's runtime profiles (heap, CPU, goroutines) at http://<addr>/debug/pprof/ on a listener of their own, without authentication: a loopback IP only (127.0.0.1:6060, [::1]:6060), reach it with kubectl port-forward; empty (the default) serves none (env DRAINWATCH_PPROF_ADDR)")
	fs.StringVar(&f.otlpEndpoint, "otlp-endpoint", os.Getenv("DRAINWATCH_OTLP_ENDPOINT"), "send every complete termination and startup as an OpenTelemetry log record to this OTLP collector: host:port (TLS unless --otlp-insecure) or a URL (https://collector:4318); at least once, retried from the state store through the collector's outages; empty (the default) sends none (env DRAINWATCH_OTLP_ENDPOINT)")
	fs.StringVar(&f.otlpProtocol, "otlp-protocol", envOr("DRAINWATCH_OTLP_PROTOCOL", otlp.ProtocolGRPC), "grpc (port 4317) or http/protobuf (port 4318) (env DRAINWATCH_OTLP_PROTOCOL)")
	fs.BoolVar(&f.otlpInsecure, "otlp-insecure", os.Getenv("DRAINWATCH_OTLP_INSECURE") == "true", "send to --otlp-endpoint without TLS (env DRAINWATCH_OTLP_INSECURE=true)")
	fs.StringVar(&f.otlpCA, "otlp-ca-file", os.Getenv("DRAINWATCH_OTLP_CA_FILE"), "verify the collector's certificate against this PEM bundle instead of the system's (env DRAINWATCH_OTLP_CA_FILE)")
	fs.StringVar(&f.otlpHeaders, "otlp-headers", os.Getenv("DRAINWATCH_OTLP_HEADERS"), "headers sent with every export, key=value,key=value (e.g. Authorization=Bearer <token>); prefer the env variable for secrets (env DRAINWATCH_OTLP_HEADERS)")
	fs.StringVar(&f.completedInMemory, "completed-in-memory", envOr("DRAINWATCH_COMPLETED_IN_MEMORY", strconv.Itoa(daemon.DefaultCompletedInMemory)),
		"how many complete terminations the API serves from memory; older ones (up to 7 days) are read from the state store, so memory stays flat however many pods terminate (env DRAINWATCH_COMPLETED_IN_MEMORY)")
	fs.StringVar(&f.keepCompleted, "keep-completed", envOr("DRAINWATCH_KEEP_COMPLETED", daemon.DefaultKeepCompleted.String()),
		"how long complete terminations are kept (API, UI, timeline) in the state store after their last mark; the store's size follows from it, a few KiB per termination (env DRAINWATCH_KEEP_COMPLETED)")
	fs.StringVar(&f.seriesTTL, "series-ttl", envOr("DRAINWATCH_SERIES_TTL", exporter.DefaultSeriesTTL.String()),
		"how long a revision's series (refused, killed, ... by namespace, workload and revision) stay in /metrics after its last termination; the series held, and the pod UIDs counted into them, follow from it (env DRAINWATCH_SERIES_TTL)")
	fs.BoolVar(&f.allNodes, "watch-all-nodes", os.Getenv("DRAINWATCH_WATCH_ALL_NODES") == "true", "watch every Node (not only this one) so that the routing sources of a termination on other nodes, their kube-proxy and their pods, are named after their node instead of by address; a cluster-wide watch whose Node updates reach every daemon (env DRAINWATCH_WATCH_ALL_NODES=true)")
	fs.StringVar(&f.namespaces, "namespaces", os.Getenv("DRAINWATCH_NAMESPACES"), "observe only the pods of these namespaces (comma-separated); empty: every namespace. Pods out of scope are never watched in the kernel and none of their terminations is recorded (env DRAINWATCH_NAMESPACES)")
	fs.StringVar(&f.excludeNamespaces, "exclude-namespaces", os.Getenv("DRAINWATCH_EXCLUDE_NAMESPACES"), "leave out the pods of these namespaces (comma-separated), e.g. kube-system or a noisy batch namespace (env DRAINWATCH_EXCLUDE_NAMESPACES)")
	fs.StringVar(&f.podSelector, "pod-selector", os.Getenv("DRAINWATCH_POD_SELECTOR"), "observe only pods whose labels match this selector (kubectl syntax: app=web,tier!=batch); a pod is decided when first seen and stays observed until deleted (env DRAINWATCH_POD_SELECTOR)")
	return fs
}

func parseRunFlags(args []string, stderr io.Writer) (runFlags, error) {
	var f runFlags
	fs := runFlagSet(&f, stderr)
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("drainwatch run takes no arguments, got %q", fs.Args())
	}
	return f, checkPprofAddr(f.pprofAddr)
}

// parseSize reads a size in bytes, with a binary suffix or not ("4Mi").
func parseSize(s string) (int, error) {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a size: %w", s, err)
	}
	n, ok := q.AsInt64()
	if !ok || n <= 0 || n > math.MaxInt32 {
		return 0, fmt.Errorf("%q is not a size in bytes up to 2Gi", s)
	}
	return int(n), nil
}

func envOr(key, def string) string {
	if v, ok := os.LookupEnv(key); ok {
		return v
	}
	return def
}

func newLogger(f runFlags, w io.Writer) (zerolog.Logger, error) {
	level, err := zerolog.ParseLevel(f.logLevel)
	if err != nil {
		return zerolog.Nop(), fmt.Errorf("--log-level %q: %w", f.logLevel, err)
	}
	switch f.logFormat {
	case "json":
	case "console":
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.RFC3339Nano}
	default:
		return zerolog.Nop(), fmt.Errorf("--log-format %q: want json or console", f.logFormat)
	}
	return zerolog.New(w).Level(level).With().Timestamp().Logger(), nil
}

// runCmd is `drainwatch run`: the node daemon. It returns the exit code.
func runCmd(args []string) int {
	f, err := parseRunFlags(args, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		// flag prints its own parse errors; this says why for the others
		// (an argument after the flags).
		fmt.Fprintln(os.Stderr, "drainwatch run:", err)
		return 2
	}
	sampleHeap(f.pprofAddr)
	log, err := newLogger(f, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "drainwatch run:", err)
		return 2
	}
	scope, err := kube.ParsePodScope(f.namespaces, f.excludeNamespaces, f.podSelector)
	if err != nil {
		fmt.Fprintln(os.Stderr, "drainwatch run:", err)
		return 2
	}
	ringBytes, err := parseSize(f.ringBufferSize)
	if err != nil {
		fmt.Fprintln(os.Stderr, "drainwatch run: --ring-buffer-size:", err)
		return 2
	}
	inMemory, err := strconv.Atoi(f.completedInMemory)
	if err != nil || inMemory <= 0 {
		fmt.Fprintf(os.Stderr, "drainwatch run: --completed-in-memory %q: want a positive number of terminations\n", f.completedInMemory)
		return 2
	}
	keep, err := time.ParseDuration(f.keepCompleted)
	if err != nil || keep < time.Minute {
		fmt.Fprintf(os.Stderr, "drainwatch run: --keep-completed %q: want a duration of at least 1m (e.g. 24h, 168h)\n", f.keepCompleted)
		return 2
	}
	ttl, err := time.ParseDuration(f.seriesTTL)
	if err != nil || ttl < time.Minute {
		fmt.Fprintf(os.Stderr, "drainwatch run: --series-ttl %q: want a duration of at least 1m (e.g. 1h): alerts must see a series' increase before it goes\n", f.seriesTTL)
		return 2
	}
	if f.blackholeWindow < time.Second || f.blackholeWindow > time.Minute {
		fmt.Fprintf(os.Stderr, "drainwatch run: --blackhole-window %s: want 1s to 1m: shorter misses the drops of a neighbour's failed resolution (3 s), longer holds every termination open that long\n", f.blackholeWindow)
		return 2
	}
	otlpCfg, err := otlpConfig(f)
	if err != nil {
		fmt.Fprintln(os.Stderr, "drainwatch run:", err)
		return 2
	}
	d, err := daemon.New(daemon.Config{
		NodeName: f.nodeName, Kubeconfig: f.kubeconfig, ListenAddr: f.listen,
		StateDir: f.stateDir, CgroupRoot: f.cgroupRoot, Log: log, NoEvents: f.noEvents,
		PinPath: f.pinPath, UnpinOnExit: f.unpinOnExit,
		Auth: f.auth, TLSCertFile: f.tlsCert, TLSKeyFile: f.tlsKey, TLSSelfSigned: f.tlsSelfSigned,
		Correlate:     correlate.Config{ProbeComms: splitList(f.kubeletComms), StartupWindow: f.startupWindow, BlackholeWindow: f.blackholeWindow},
		HTTP2Tracking: f.http2Tracking, RingBufferSize: ringBytes, CompletedInMemory: inMemory,
		WatchAllNodes: f.allNodes, KeepCompleted: keep, SeriesTTL: ttl, Scope: scope, OTLP: otlpCfg,
	})
	if err != nil {
		log.Error().Err(err).Msg("invalid configuration")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log.Info().Str("node", f.nodeName).Str("state_dir", f.stateDir).Str("listen", f.listen).Str("pin_path", f.pinPath).
		Str("auth", f.auth).Bool("tls", f.tlsCert != "" || f.tlsSelfSigned).Stringer("pods", scope).Msg("drainwatch starting")
	if f.pprofAddr != "" {
		servePprof(ctx, f.pprofAddr, log)
	}
	if err := d.Run(ctx); err != nil {
		log.Error().Err(err).Msg("drainwatch failed")
		return 1
	}
	return 0
}

// otlpConfig is the OTLP exporter's configuration; nil without
// --otlp-endpoint.
func otlpConfig(f runFlags) (*otlp.Config, error) {
	if f.otlpEndpoint == "" {
		return nil, nil
	}
	if f.otlpProtocol != otlp.ProtocolGRPC && f.otlpProtocol != otlp.ProtocolHTTP {
		return nil, fmt.Errorf("--otlp-protocol %q: want %s or %s", f.otlpProtocol, otlp.ProtocolGRPC, otlp.ProtocolHTTP)
	}
	headers, err := otlp.ParseHeaders(f.otlpHeaders)
	if err != nil {
		return nil, fmt.Errorf("--otlp-headers: %w", err)
	}
	if f.otlpInsecure && strings.HasPrefix(f.otlpEndpoint, "https://") {
		return nil, fmt.Errorf("--otlp-insecure with an https:// --otlp-endpoint %q: drop one", f.otlpEndpoint)
	}
	if f.otlpCA != "" {
		if _, err := os.Stat(f.otlpCA); err != nil {
			return nil, fmt.Errorf("--otlp-ca-file: %w", err)
		}
	}
	return &otlp.Config{Endpoint: f.otlpEndpoint, Protocol: f.otlpProtocol, Insecure: f.otlpInsecure, CAFile: f.otlpCA, Headers: headers}, nil
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
