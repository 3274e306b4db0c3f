package e2e_test

import (
	"testing"
)

// TestRealNodeScenarios runs TestScenarios' terminations on the real node
// (kubelet v1.37, containerd 1.6, runc, CNI bridge): a preStop sleep behind
// a late router (0 refused by either account), a shell as PID 1 ignoring
// SIGTERM with 3 requests in flight at SIGKILL (3 killed, exit 137), a
// preStop exec of a missing binary (containerd's exec fails, the kubelet's
// FailedPreStopHook Event is the diagnosis).
func TestRealNodeScenarios(t *testing.T) {
	e := startRealNode(t, "e2rs")
	t.Run("naive-prestop-behind-router", func(t *testing.T) { prestopBehindRouter(t, e.c, e.ds, e.onRealNode) })
	t.Run("ignore-term-inflight", func(t *testing.T) { ignoreTermInflight(t, e.c, e.ds, e.onRealNode) })
	t.Run("prestop-missing-binary", func(t *testing.T) { prestopMissingBinary(t, e.c, e.ds, e.onRealNode) })
}
