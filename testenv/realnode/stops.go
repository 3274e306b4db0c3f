package realnode

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// ContainerStop is how the real kubelet stopped one container, from its own
// log (--v 2): "Killing container with a grace period" just before
// StopContainer (the grace left after any preStop hook), and PLEG's
// "container finished" with the exit code (and the bare container ID) at
// its next relist (up to a second after the exit).
type ContainerStop struct {
	Killing     time.Time // the stop signal follows within milliseconds
	Grace       time.Duration
	Finished    time.Time // zero until PLEG saw the exit
	ExitCode    int
	ContainerID string // "containerd://…"
}

// SIGKILLed reports whether the container ran out of its grace: exit code
// 137 is containerd's SIGKILL at Killing + Grace.
func (s ContainerStop) SIGKILLed() bool { return !s.Finished.IsZero() && s.ExitCode == 137 }

// SIGKILLAt is when containerd sent SIGKILL (zero when it did not): the
// kubelet's StopContainer timeout is the grace it logged.
func (s ContainerStop) SIGKILLAt() time.Time {
	if !s.SIGKILLed() {
		return time.Time{}
	}
	return s.Killing.Add(s.Grace)
}

var klogField = regexp.MustCompile(`(\w+)=("(?:[^"\\]|\\.)*"|\S+)`)

// klogFields parses a structured klog line's key=value pairs.
func klogFields(line string) map[string]string {
	out := map[string]string{}
	for _, m := range klogField.FindAllStringSubmatch(line, -1) {
		v := m[2]
		if u, err := strconv.Unquote(v); err == nil {
			v = u
		}
		out[m[1]] = v
	}
	return out
}

// bareID is a "containerd://…" ID without its runtime prefix, as PLEG logs it.
func bareID(id string) string {
	if _, bare, ok := strings.Cut(id, "://"); ok {
		return bare
	}
	return id
}

// ContainerStop finds the first kill of pod's ("namespace/name", UID uid)
// container at or after since in the kubelet's log, and its exit.
func (n *Node) ContainerStop(pod, uid, container string, since time.Time) (ContainerStop, error) {
	f, err := os.Open(filepath.Join(n.Dir, "kubelet.log"))
	if err != nil {
		return ContainerStop{}, fmt.Errorf("kubelet log: %w", err)
	}
	defer f.Close()
	var s ContainerStop
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		kill := strings.Contains(line, `"Killing container with a grace period"`)
		finished := strings.Contains(line, `"Generic (PLEG): container finished"`)
		if !kill && !finished {
			continue
		}
		at, err := klogTime(line, since.Year())
		if err != nil {
			return s, err
		}
		if at.Before(since) {
			continue
		}
		kv := klogFields(line)
		switch {
		case kill && s.Killing.IsZero() && kv["pod"] == pod && kv["containerName"] == container:
			grace, err := strconv.Atoi(kv["gracePeriod"])
			if err != nil {
				return s, fmt.Errorf("kubelet log line %q: gracePeriod: %w", line, err)
			}
			s.Killing, s.Grace, s.ContainerID = at, time.Duration(grace)*time.Second, kv["containerID"]
		case finished && !s.Killing.IsZero() && s.Finished.IsZero() && kv["podID"] == uid && kv["containerID"] == bareID(s.ContainerID):
			code, err := strconv.Atoi(kv["exitCode"])
			if err != nil {
				return s, fmt.Errorf("kubelet log line %q: exitCode: %w", line, err)
			}
			s.Finished, s.ExitCode = at, code
		}
	}
	if err := sc.Err(); err != nil {
		return s, err
	}
	if s.Killing.IsZero() {
		return s, fmt.Errorf("the kubelet's log has no kill of %s's container %s since %v", pod, container, since)
	}
	return s, nil
}
