package netlab

import (
	"testing"

	"github.com/rs/zerolog"
)

func TestRelayOnlyToLoopback(t *testing.T) {
	for _, target := range []string{"10.0.0.1:443", "192.0.2.1:6443", "localhost:6443", "6443"} {
		if _, err := StartRelay(nil, "127.0.0.1:0", target, zerolog.Nop()); err == nil {
			t.Errorf("a relay to %q started", target)
		}
	}
}
