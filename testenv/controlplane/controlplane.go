// Package controlplane runs the real Kubernetes control plane (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler) on loopback, from
// binaries built by `make controlplane`. Every component is a child process that
// dies with its parent; its state (certificates, etcd data, logs, kubeconfig)
// lives in one directory.
package controlplane

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Controllers run by kube-controller-manager: what a rollout needs, nothing
// more. The node-lifecycle controller is left out, so Nodes are never tainted.
const Controllers = "deployment-controller,replicaset-controller,endpointslice-controller," +
	"garbage-collector-controller,namespace-controller,serviceaccount-controller," +
	"serviceaccount-token-controller"

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
	Log    zerolog.Logger
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
	procs []*process // in start order
}

// Start runs etcd, the API server, the controller manager and the scheduler,
// and returns once the API server is ready and the default ServiceAccount exists
// (pods cannot be created before that).
func Start(ctx context.Context, cfg Config) (*ControlPlane, error) {
	cp, err := prepare(cfg)
	if err != nil {
		return nil, err
	}
	if err := cp.start(ctx); err != nil {
		_ = cp.Stop()
		return nil, err
	}
	cp.log.Info().Str("url", cp.URL).Str("kubeconfig", cp.Kubeconfig).Msg("control plane ready")
	return cp, nil
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
	return &ControlPlane{Dir: cfg.Dir, BinDir: cfg.BinDir, log: cfg.Log}, nil
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

// Stop stops the components in reverse start order. Calling it twice is fine.
func (cp *ControlPlane) Stop() error {
	for i := len(cp.procs) - 1; i >= 0; i-- {
		if err := cp.procs[i].stop(10 * time.Second); err != nil {
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

// check returns the first component that has exited, as an error.
func (cp *ControlPlane) check() error {
	for _, p := range cp.procs {
		if done, err := p.exited(); done {
			return fmt.Errorf("%w (see %s)", err, filepath.Join(cp.Dir, p.name+".log"))
		}
	}
	return nil
}
