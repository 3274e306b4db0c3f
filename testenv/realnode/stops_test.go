package realnode

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestContainerStop reads a kill and its exit from kubelet 1.37 log lines
// (as --v 2 writes them), skipping another container's and an earlier one.
func TestContainerStop(t *testing.T) {
	dir := t.TempDir()
	log := `I1202 02:40:00.000001   42 kuberuntime_container.go:912] "Killing container with a grace period" pod="ns/old" podUID="u0" containerName="server" containerID="containerd://aaa" gracePeriod=30
I1202 02:41:00.250000   42 kuberuntime_container.go:912] "Killing container with a grace period" pod="ns/web" podUID="u1" containerName="server" containerID="containerd://bbb" gracePeriod=2
I1202 02:41:01.000000   42 generic.go:406] "Generic (PLEG): container finished" podID="u0" containerID="aaa" exitCode=0
I1202 02:41:03.100000   42 generic.go:406] "Generic (PLEG): container finished" podID="u1" containerID="bbb" exitCode=137
`
	if err := os.WriteFile(filepath.Join(dir, "kubelet.log"), []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	n := &Node{Dir: dir}
	since := time.Date(2026, 12, 2, 2, 41, 0, 0, time.Local)
	s, err := n.ContainerStop("ns/web", "u1", "server", since)
	if err != nil {
		t.Fatal(err)
	}
	kill := time.Date(2026, 12, 2, 2, 41, 0, 250000000, time.Local)
	if !s.Killing.Equal(kill) || s.Grace != 2*time.Second || s.ExitCode != 137 || !s.SIGKILLed() ||
		!s.SIGKILLAt().Equal(kill.Add(2*time.Second)) || s.Finished.IsZero() {
		t.Errorf("stop %+v (SIGKILL at %v), want killed at %v with 2 s grace, exit 137", s, s.SIGKILLAt(), kill)
	}
	if _, err := n.ContainerStop("ns/web", "u1", "sidecar", since); err == nil {
		t.Error("a container the kubelet never killed: no error")
	}
}
