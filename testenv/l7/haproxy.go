package l7

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// haproxyPath is Debian's haproxy.
const haproxyPath = "/usr/sbin/haproxy"

// haproxySlots is the number of server-template slots: the most endpoints a
// Service behind it may have at once.
const haproxySlots = 16

// haproxy runs Debian's haproxy in the foreground (-db), its request log on
// stdout, its runtime API on a unix socket in Dir.
type haproxy struct {
	cfg   Config
	addr  string
	slots slots
}

func (h *haproxy) socket() string  { return filepath.Join(h.cfg.Dir, "admin.sock") }
func (h *haproxy) logPath() string { return filepath.Join(h.cfg.Dir, "haproxy.out") }

func (h *haproxy) start(initial []string) (*exec.Cmd, error) {
	conf := filepath.Join(h.cfg.Dir, "haproxy.cfg")
	if err := os.WriteFile(conf, []byte(h.config()), 0o644); err != nil {
		return nil, fmt.Errorf("haproxy config: %w", err)
	}
	cmd, err := startIn(h.cfg.NetNS, h.cfg.Dir, "haproxy", []string{haproxyPath, "-db", "-f", conf})
	if err != nil {
		return nil, err
	}
	if err := waitFile(h.socket()); err != nil {
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("haproxy runtime API: %w (see %s)", err, h.logPath())
	}
	if err := h.apply(initial); err != nil {
		_ = cmd.Process.Kill()
		return nil, err
	}
	return cmd, nil
}

// apply moves the slots to the new set through the runtime API: removed
// endpoints' slots go to maintenance, new endpoints get a free slot's
// address and go ready. Slots of unchanged endpoints, and their pools, stay.
func (h *haproxy) apply(backends []string) error {
	gone, added, err := h.slots.assign(backends)
	if err != nil {
		return err
	}
	var cmds []string
	for _, s := range gone {
		cmds = append(cmds, fmt.Sprintf("set server be/s%d state maint", s))
	}
	for _, a := range added {
		cmds = append(cmds, fmt.Sprintf("set server be/s%d addr %s port %s", a.slot, a.host, a.port),
			fmt.Sprintf("set server be/s%d state ready", a.slot))
	}
	return runtimeAPI(h.socket(), cmds)
}

// stop is haproxy's soft stop (SIGUSR1): listeners close, streams finish
// and are logged, then it exits. A hard stop (SIGTERM) can lose the log
// line of the last request.
func (h *haproxy) stop(cmd *exec.Cmd) error { return cmd.Process.Signal(syscall.SIGUSR1) }

func (h *haproxy) counts() (Counts, error) { return parseHAProxyLog(h.logPath()) }

// config: one frontend on the namespace's loopback, one backend of empty
// slots (disabled: in maintenance until the runtime API fills them). The
// log line (after the "l7req" tag) is: client, server address, status,
// termination state, retries, the request line.
func (h *haproxy) config() string {
	retry := "  retries 3\n  retry-on conn-failure\n"
	switch h.cfg.Retry {
	case RetryNone:
		retry = "  retries 0\n  retry-on none\n"
	case RetryEmptyResponse:
		retry = "  retries 3\n  retry-on conn-failure empty-response\n  option redispatch\n"
	}
	idle := h.cfg.IdleTimeout.Milliseconds()
	return fmt.Sprintf(`global
  maxconn 1024
  stats socket %s mode 600 level admin
  log stdout format raw local0

defaults
  mode http
  log global
  option dontlognull
  log-format "%s"
  timeout connect 1s
  timeout client 30s
  timeout http-keep-alive 30s
  timeout server 30s
%s
frontend fe
  bind %s
  default_backend be

backend be
  balance roundrobin
  http-reuse always
  server-template s 1-%d 127.0.0.1:1 disabled pool-purge-delay %dms
`, h.socket(), HAProxyLogFormat, retry, h.addr, haproxySlots, idle)
}
