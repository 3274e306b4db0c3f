package controlplane

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

const startTimeout = 90 * time.Second

// writeKubeconfig writes <dir>/kubeconfig and builds the clients from it, so
// tests and kubectl use exactly the same credentials.
func (cp *ControlPlane) writeKubeconfig(c *credentials) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["testenv"] = &clientcmdapi.Cluster{Server: cp.URL, CertificateAuthorityData: c.caPEM}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: c.Token}
	kc.Contexts["testenv"] = &clientcmdapi.Context{Cluster: "testenv", AuthInfo: "admin"}
	kc.CurrentContext = "testenv"
	cp.Kubeconfig = filepath.Join(cp.Dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, cp.Kubeconfig); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", cp.Kubeconfig)
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	rc.QPS, rc.Burst = 200, 400
	cp.RestConfig = rc
	// Built-in types travel as protobuf: cheaper for the API server on a
	// 2-core machine. RestConfig stays JSON for dynamic clients.
	pb := rest.CopyConfig(rc)
	pb.ContentType = "application/vnd.kubernetes.protobuf"
	pb.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	if cp.Client, err = kubernetes.NewForConfig(pb); err != nil {
		return fmt.Errorf("building client: %w", err)
	}
	return nil
}

// poll calls cond every 100 ms until it is true, a component exits, or the
// start timeout passes.
func (cp *ControlPlane) poll(ctx context.Context, what string, cond func(context.Context) bool) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if err := cp.check(); err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if cond(ctx) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s (logs in %s): %w", what, cp.Dir, ctx.Err())
		case <-tick.C:
		}
	}
}

func (cp *ControlPlane) waitReady(ctx context.Context) error {
	return cp.poll(ctx, "kube-apiserver /readyz", func(ctx context.Context) bool {
		body, err := cp.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok"
	})
}

func (cp *ControlPlane) waitDefaultServiceAccount(ctx context.Context) error {
	return cp.poll(ctx, "the default ServiceAccount", func(ctx context.Context) bool {
		_, err := cp.Client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	})
}
