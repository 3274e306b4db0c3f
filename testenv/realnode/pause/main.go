// Command pause is testenv/realnode's sandbox image entrypoint, what
// registry.k8s.io/pause does: hold the pod's namespaces as PID 1, reap
// zombies, and exit at SIGINT or SIGTERM (containerd stops a sandbox with
// SIGTERM, then SIGKILL).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		reap()
	}
}

// reap collects every exited child so none stays a zombie.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
