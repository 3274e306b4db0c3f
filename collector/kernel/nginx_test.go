package kernel

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/testenv/privileged"
)

// nginxConf runs Debian's nginx in the foreground with two workers, every
// path inside dir.
const nginxConf = `daemon off;
master_process on;
worker_processes 2;
pid %[1]s/nginx.pid;
error_log stderr;
events { worker_connections 64; }
http {
	access_log off;
	client_body_temp_path %[1]s/body;
	proxy_temp_path %[1]s/proxy;
	fastcgi_temp_path %[1]s/fastcgi;
	uwsgi_temp_path %[1]s/uwsgi;
	scgi_temp_path %[1]s/scgi;
	server { listen %[2]s:8080; location / { return 200 "ok\n"; } }
}
`

// TestSigtermNginx: nginx handles SIGTERM (fast shutdown): the master tells
// its workers over its channel (no signal: the kernel sees only SIGIO), the
// listener closes and the master exits 0. In order: SIGTERM to the master
// from the test, one listen_close, the master's clean exit; both workers
// exit 0.
func TestSigtermNginx(t *testing.T) {
	privileged.RequireFile(t, "/usr/sbin/nginx", "Debian nginx for the real-server tests")
	l := newLab(t)
	k := openTestKernel(t, Options{})
	srv := l.server.Inode()
	if err := k.WatchNetns(srv); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(nginxConf, dir, serverIP)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := l.startServer(t, 8080, "/usr/sbin/nginx", "-c", conf, "-p", dir)
	master := uint32(cmd.Process.Pid)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("nginx exit: %v", err)
	}
	evs := collect(k, 10*time.Second, func(evs []collector.Event) bool { return countExits(evs, master) > 0 })
	evs = append(evs, drain(k, 300*time.Millisecond)...)
	var order []string
	workerExits := 0
	for _, ev := range evs {
		switch {
		case ev.Type == collector.EventSignal && ev.Signal == 15 && ev.PID == master && ev.SenderPID == uint32(os.Getpid()):
			order = append(order, "sigterm")
		case ev.Type == collector.EventListenClose && ev.NetnsIno == srv && ev.Local.String() == serverIP+":8080":
			order = append(order, "listen_close")
		case ev.Type == collector.EventExit && ev.PID == master:
			order = append(order, fmt.Sprintf("exit %d/%d", ev.ExitCode, ev.ExitSignal))
		case ev.Type == collector.EventExit && ev.ExitCode == 0:
			workerExits++
		}
	}
	want := []string{"sigterm", "listen_close", "exit 0/0"}
	if fmt.Sprint(order) != fmt.Sprint(want) || workerExits != 2 {
		t.Fatalf("master: %q, worker exits %d; want %q and 2", order, workerExits, want)
	}
}

func countExits(evs []collector.Event, pid uint32) int {
	n := 0
	for _, ev := range evs {
		if ev.Type == collector.EventExit && ev.PID == pid {
			n++
		}
	}
	return n
}
