// Command kubeletprober is testenv's kubelet prober. The node agent installs
// it as a binary named "kubelet", so the kernel sees its probe connections
// come from a task whose comm is "kubelet", as on a real node; it talks to
// the agent over stdin/stdout (see package testenv/node/kubeletprobe).
package main

import (
	"fmt"
	"os"

	"github.com/drainwatch/drainwatch/testenv/node/kubeletprobe"
)

func main() {
	if err := kubeletprobe.Serve(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "kubelet prober:", err)
		os.Exit(1)
	}
}
