package runtime

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/testenv/netlab"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newNS(t *testing.T, name string) *netlab.NS {
	ns, err := netlab.New(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	return ns
}

// waitFor polls cond every 50 ms, failing the test after within (a bound,
// not a timed assertion).
func waitFor(t *testing.T, within time.Duration, cond func() bool, stderr *syncBuffer) {
	t.Helper()
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("not reached within %v; trace stderr:\n%s", within, stderr.String())
}

func itoa(n uint32) string { return strconv.FormatUint(uint64(n), 10) }

func fmtSscanHex(s string, v *uint64) (int, error) { return fmt.Sscanf(s, "%x", v) }

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, " | ")
}
