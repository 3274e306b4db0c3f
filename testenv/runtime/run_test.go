package runtime

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/testenv/controlplane/cptest"
)

// runReady runs `drainwatch run` in the container with the DaemonSet's
// context and mounts, a read-only kubeconfig for testenv's API server and
// NODE_NAME, and polls its /readyz, then /healthz, until 200 (bounded).
//
// The container shares the host's network namespace (--net-host) for this
// test only: the API server listens on 127.0.0.1 and there is no CNI here
// to give the container a route to it. The DaemonSet itself is not
// hostNetwork (the kubelet probes the pod IP).
func runReady(t *testing.T, ctx context.Context, c *Containerd, flags []string) {
	cp := cptest.Get(t)
	port := freePort(t)
	args := append(append([]string{"run", "--rm", "--net-host", "--env", "NODE_NAME=runtime-node",
		"--mount", "type=bind,src=" + cp.Kubeconfig + ",dst=/etc/drainwatch/kubeconfig,options=rbind:rprivate:ro"},
		flags...), imageRef, "daemon", "/usr/bin/drainwatch", "run", "--node-name=$(NODE_NAME)",
		"--kubeconfig=/etc/drainwatch/kubeconfig", "--listen=127.0.0.1:"+port, "--state-dir=/var/lib/drainwatch",
		"--unpin-on-exit")
	// ctr passes arguments verbatim: the kubelet's $(NODE_NAME) expansion
	// is done here.
	for i, a := range args {
		args[i] = strings.ReplaceAll(a, "$(NODE_NAME)", "runtime-node")
	}
	var stderr syncBuffer
	cmd := c.CtrCommand(ctx, args...)
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	url := "http://127.0.0.1:" + port
	waitFor(t, 60*time.Second, func() bool { return status(url+"/readyz") == 200 }, &stderr)
	if code := status(url + "/healthz"); code != 200 {
		t.Fatalf("/healthz %d after /readyz 200\n%s", code, stderr.String())
	}
	t.Logf("drainwatch run in the container: /readyz 200, /healthz 200; log: %s", lastLines(stderr.String(), 3))
	if _, err := c.Ctr(ctx, "tasks", "kill", "daemon"); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("drainwatch run: %v\n%s", err, stderr.String())
	}
}

func status(url string) int {
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
}
