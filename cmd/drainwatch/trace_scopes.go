package main

import (
	"fmt"

	"github.com/drainwatch/drainwatch/collector/node"
)

// checkScopes resolves --netns and --pid before any program is loaded: a
// wrong path is reported at once, not after attaching every program.
func (f traceFlags) checkScopes() error {
	if f.netns != "" {
		if _, err := node.ResolveNetns(f.netns); err != nil {
			return fmt.Errorf("--netns: %w", err)
		}
	}
	if f.pid != 0 {
		if _, err := node.NetnsOfPID(f.pid); err != nil {
			return fmt.Errorf("--pid %d: %w", f.pid, err)
		}
	}
	return nil
}
