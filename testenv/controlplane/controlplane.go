// Package controlplane runs the real Kubernetes control plane (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler) on loopback, from
// binaries built by `make controlplane`. Every component is a child process that
// dies with its parent; its state (certificates, etcd data, logs, kubeconfig)
// lives in one directory.
package controlplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Controllers run by kube-controller-manager: what rollouts of the owners
// drainwatch attributes need, and the disruption controller that computes
// PodDisruptionBudgets for the Eviction API. The node-lifecycle controller
// is left out, so Nodes are never tainted. The root-ca-cert-publisher
// writes kube-root-ca.crt into every namespace: a real kubelet
// (testenv/realnode) waits for it to mount a pod's service-account token.
const Controllers = "deployment-controller,replicaset-controller,endpointslice-controller," +
	"statefulset-controller,daemonset-controller,job-controller,cronjob-controller,disruption-controller," +
	"garbage-collector-controller,namespace-controller,serviceaccount-controller," +
	"serviceaccount-token-controller,root-ca-certificate-publisher-controller"

const (
	serviceCIDR = "10.96.0.0/16"
	serviceIP   = "10.96.0.1"
)

// Config configures Start.
type Config struct {
	// Dir holds state and logs; a new temporary directory when empty.
	Dir string
	// BinDir holds the binaries; BinDir() when empty.
	BinDir string
	// DisableContainerStopSignals starts kube-apiserver with
	// --feature-gates=ContainerStopSignals=false (the v1.37 default: alpha,
	// off), which drops spec lifecycle.stopSignal. Otherwise the gate is on.
	DisableContainerStopSignals bool
	// Authorization is kube-apiserver's --authorization-mode; empty is
	// AlwaysAllow. "RBAC" for tests that need a request denied.
	Authorization string
	Log           zerolog.Logger
}

// ControlPlane is a running control plane.
type ControlPlane struct {
	Dir        string
	BinDir     string
	Kubeconfig string // usable by client-go and kubectl
	URL        string // https://127.0.0.1:<port>
	RestConfig *rest.Config
	Client     kubernetes.Interface

	log   zerolog.Logger
	gates string     // kube-apiserver --feature-gates
	authz string     // kube-apiserver --authorization-mode
	procs []*process // in start order
	// apiArgs are kube-apiserver's flags, kept so that StartAPIServer
	// starts it again exactly as Start did (same port, etcd, certificates).
	apiArgs []string
}

// Start runs etcd, the API server, the controller manager and the scheduler,
// and returns once the API server is ready and the default ServiceAccount exists
// (pods cannot be created before that).
//
// Ports are picked free and then bound by the components; when another process
// takes one in between (parallel test packages), Start tries again with new
// ports, up to three times.
func Start(ctx context.Context, cfg Config) (*ControlPlane, error) {
	cp, err := prepare(cfg)
	if err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		err = cp.start(ctx)
		if err == nil {
			break
		}
		_ = cp.stopWithin(0) // a half-started control plane has nothing to save
		if !errors.Is(err, errPortTaken) || attempt == 3 {
			return nil, err
		}
		cp.log.Warn().Err(err).Int("attempt", attempt).Msg("a port was taken; starting again")
		if err := resetDir(cp.Dir); err != nil {
			return nil, err
		}
	}
	cp.log.Info().Str("url", cp.URL).Str("kubeconfig", cp.Kubeconfig).Msg("control plane ready")
	return cp, nil
}

// resetDir empties the state directory for another attempt.
func resetDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("resetting %s: %w", dir, err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("resetting %s: %w", dir, err)
		}
	}
	return nil
}

func prepare(cfg Config) (*ControlPlane, error) {
	var err error
	if cfg.BinDir == "" {
		if cfg.BinDir, err = BinDir(); err != nil {
			return nil, err
		}
	}
	if cfg.Dir == "" {
		if cfg.Dir, err = os.MkdirTemp("", "drainwatch-cp-"); err != nil {
			return nil, fmt.Errorf("creating control-plane state dir: %w", err)
		}
	} else if err = os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating control-plane state dir: %w", err)
	}
	gates := "ContainerStopSignals=true"
	if cfg.DisableContainerStopSignals {
		gates = "ContainerStopSignals=false"
	}
	return &ControlPlane{Dir: cfg.Dir, BinDir: cfg.BinDir, log: cfg.Log, gates: gates, authz: cfg.Authorization}, nil
}

func (cp *ControlPlane) start(ctx context.Context) error {
	creds, err := writeCredentials(cp.Dir)
	if err != nil {
		return fmt.Errorf("writing credentials: %w", err)
	}
	etcdURL, err := cp.startEtcd()
	if err != nil {
		return err
	}
	if err := cp.startAPIServer(creds, etcdURL); err != nil {
		return err
	}
	if err := cp.writeKubeconfig(creds); err != nil {
		return err
	}
	if err := cp.waitReady(ctx); err != nil {
		return err
	}
	if err := cp.startControllers(creds); err != nil {
		return err
	}
	return cp.waitDefaultServiceAccount(ctx)
}

// Stop stops the components in reverse start order, each with SIGTERM and
// SIGKILL 10 s later, and removes etcd's data (~120 MB of preallocated WAL;
// a stopped control plane is never restarted). Logs, certificates and the
// kubeconfig stay in Dir. Calling it twice is fine.
func (cp *ControlPlane) Stop() error {
	if err := cp.stopWithin(10 * time.Second); err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(cp.Dir, "etcd")); err != nil {
		return fmt.Errorf("removing etcd data: %w", err)
	}
	return nil
}

func (cp *ControlPlane) stopWithin(grace time.Duration) error {
	for i := len(cp.procs) - 1; i >= 0; i-- {
		if err := cp.procs[i].stop(grace); err != nil {
			return err
		}
	}
	cp.procs = nil
	return nil
}

// Kubectl runs the cached kubectl against this control plane.
func (cp *ControlPlane) Kubectl(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(cp.BinDir, "kubectl"), append([]string{"--kubeconfig", cp.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("kubectl %v: %w: %s", args, err, out)
	}
	return out, nil
}

// errPortTaken marks a component that exited because its port was taken.
var errPortTaken = errors.New("port already in use")

// check returns the first component that has exited, as an error.
func (cp *ControlPlane) check() error {
	for _, p := range cp.procs {
		if done, err := p.exited(); done {
			logPath := filepath.Join(cp.Dir, p.name+".log")
			if b, _ := os.ReadFile(logPath); bytes.Contains(b, []byte("address already in use")) {
				return fmt.Errorf("%w: %w (see %s)", errPortTaken, err, logPath)
			}
			return fmt.Errorf("%w (see %s)", err, logPath)
		}
	}
	return nil
}
