package l7

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"
)

// runtimeAPI sends commands to haproxy's stats socket, one connection for
// all of them (";"-separated), and fails on any answer that is not the
// acknowledgement of a change.
func runtimeAPI(socket string, cmds []string) error {
	if len(cmds) == 0 {
		return nil
	}
	conn, err := net.DialTimeout("unix", socket, 2*time.Second)
	if err != nil {
		return fmt.Errorf("haproxy runtime API %s: %w", socket, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, strings.Join(cmds, ";")+"\n"); err != nil {
		return fmt.Errorf("haproxy runtime API: sending %q: %w", cmds, err)
	}
	out, err := io.ReadAll(conn)
	if err != nil {
		return fmt.Errorf("haproxy runtime API: reading the answer to %q: %w", cmds, err)
	}
	return checkAnswer(string(out))
}

// checkAnswer accepts the empty answer of `state` and the "changed from"
// line of `addr`; anything else is an error message.
func checkAnswer(out string) error {
	var bad []string
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.Contains(line, " changed from ") || strings.Contains(line, "no need to change") {
			continue
		}
		bad = append(bad, line)
	}
	if len(bad) > 0 {
		return fmt.Errorf("haproxy runtime API: %s", strings.Join(bad, "; "))
	}
	return nil
}

// slots maps endpoints to haproxy's server-template slots (1-based).
type slots struct{ held [haproxySlots]string }

type slotAddr struct {
	slot       int
	host, port string
}

// assign moves the slots to backends and returns the slots freed and the
// ones newly filled.
func (s *slots) assign(backends []string) (gone []int, added []slotAddr, err error) {
	for i, b := range s.held {
		if b != "" && !slices.Contains(backends, b) {
			s.held[i] = ""
			gone = append(gone, i+1)
		}
	}
	for _, b := range backends {
		if slices.Contains(s.held[:], b) {
			continue
		}
		i := slices.Index(s.held[:], "")
		if i < 0 {
			return nil, nil, fmt.Errorf("haproxy: more than %d endpoints", haproxySlots)
		}
		ap, err := netip.ParseAddrPort(b)
		if err != nil {
			return nil, nil, fmt.Errorf("haproxy: endpoint %q: %w", b, err)
		}
		s.held[i] = b
		added = append(added, slotAddr{slot: i + 1, host: ap.Addr().String(), port: fmt.Sprint(ap.Port())})
	}
	return gone, added, nil
}

// waitFile waits up to 5 s for path to exist.
func waitFile(path string) error {
	for deadline := time.Now().Add(5 * time.Second); ; {
		_, err := os.Stat(path)
		if err == nil || !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not appear in 5 s", path)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
