package lab

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

// nginxSlowMs is how long nginx's /slow download lasts: longer than the
// seeds' second of /work, so the graceful stop keeps nginx alive (listener
// closed) while the clients still come.
const nginxSlowMs = 2500

// nginxScenario is production-shaped: Debian's nginx (testenv image
// "nginx", whose image config says STOPSIGNAL SIGQUIT, nginx's graceful
// stop), a pod spec and an API that name no stop signal (the lab's node
// agents do not report status.stopSignal), the readiness probe on. The
// seeds' clients go straight at the pod; nginx closes its listener at
// SIGQUIT and finishes the slow download before it exits, so the /work
// after it is refused by a live pod. drainwatch must find SIGQUIT itself.
func nginxScenario(ctx context.Context, l *Lab) ([]Result, error) {
	dir, err := os.MkdirTemp(l.clusterDir, "nginx-")
	if err != nil {
		return nil, fmt.Errorf("nginx directory: %w", err)
	}
	argv, err := workload.Nginx{Dir: filepath.Join(dir, "nginx"), Addr: strconv.Itoa(cluster.ServerPort), Slow: nginxSlowMs}.Write()
	if err != nil {
		return nil, err
	}
	dep := cluster.ServerDeployment("lab-nginx", "web", workload.ModeNaive, 1)
	ct := &dep.Spec.Template.Spec.Containers[0]
	// argv[0] is the image's entrypoint; nginx serves /work, not /ready.
	ct.Name, ct.Image, ct.Args = "nginx", "nginx", argv[1:]
	ct.ReadinessProbe.HTTPGet = &corev1.HTTPGetAction{Path: "/work", Port: intstr.FromString("http")}
	r, err := l.seedsOn(ctx, "nginx-sigquit", dep)
	if err != nil {
		return nil, err
	}
	return []Result{r}, nil
}
