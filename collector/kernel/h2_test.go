package kernel

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/drainwatch/drainwatch/collector"
)

// TestH2StreamsKilledBySigkill: a Go HTTP/2 cleartext server, then
// SIGKILL. Its connections: idle ones exchanging PINGs after a finished
// request; idle ones whose last frame is the client's WINDOW_UPDATE (read
// last, never answered); ones whose held request the client reset; ones
// with one held request each; ones with one open server stream each; one
// multiplexing two held requests and a finished one. Exactly one
// conn_closed_inflight per connection with an open stream (held, streams
// and the multiplexed one), cause sigkill, kind stream; none for the
// others.
func TestH2StreamsKilledBySigkill(t *testing.T) {
	const idle, windowed, reset, held, streams, muxed, bodied = 4, 2, 2, 3, 3, 1, 1
	bin := buildH2Server(t)
	l := newLab(t)
	k := openTestKernel(t, Options{MessageProbes: MessageProbesAlways})
	srv := l.server.Inode()
	if err := k.WatchNetns(srv); err != nil {
		t.Fatal(err)
	}
	heldFile := filepath.Join(t.TempDir(), "held")
	cmd := l.startServer(t, 8080, bin, "-addr", serverIP+":8080", "-held", heldFile)
	stop := make(chan struct{})
	defer close(stop)
	want := map[uint16]bool{}
	for i := 0; i < idle; i++ {
		c := dialH2(t, l)
		c.request(t, 1, "/")
		c.wait(t, c.ended, "the answer to /")
		go c.pingEvery(50*time.Millisecond, stop)
		c.waitAcks(t, 2)
	}
	for i := 0; i < windowed; i++ {
		c := dialH2(t, l)
		c.request(t, 1, "/")
		c.wait(t, c.ended, "the answer to /")
		c.write(t, h2Frame(h2FrameWindowUpdate, 0, 0, []byte{0, 0, 4, 0}))
		waitAcked(t, c.c)
	}
	nheld := int64(0)
	for i := 0; i < reset; i++ {
		c := dialH2(t, l)
		c.request(t, 1, "/slow")
		nheld++
		waitFileSize(t, heldFile, nheld)
		c.write(t, h2Frame(h2FrameRstStream, 0, 1, []byte{0, 0, 0, 8})) // CANCEL
		// The PING's answer says the server read the RST_STREAM.
		c.write(t, h2Frame(h2FramePing, 0, 0, make([]byte, 8)))
		c.waitAcks(t, 1)
	}
	for i := 0; i < held; i++ {
		c := dialH2(t, l)
		c.request(t, 1, "/slow")
		want[c.localPort()] = true
	}
	nheld += held
	waitFileSize(t, heldFile, nheld)
	for i := 0; i < streams; i++ {
		c := dialH2(t, l)
		c.request(t, 1, "/stream")
		c.wait(t, c.data, "the first chunk of /stream")
		want[c.localPort()] = true
	}
	for i := 0; i < muxed; i++ {
		c := dialH2(t, l)
		c.request(t, 1, "/slow")
		c.request(t, 3, "/slow")
		c.request(t, 5, "/")
		c.wait(t, c.ended, "the answer to /")
		nheld += 2
		waitFileSize(t, heldFile, nheld)
		want[c.localPort()] = true
	}
	for i := 0; i < bodied; i++ {
		c := dialH2(t, l)
		c.post(t, 1, "/", 60000)
		c.wait(t, c.ended, "the answer to the POST")
		go c.pingEvery(50*time.Millisecond, stop)
		c.waitAcks(t, 2)
		c = dialH2(t, l)
		c.post(t, 1, "/", 60000)
		c.wait(t, c.ended, "the answer to the POST")
		c.request(t, 3, "/slow")
		nheld++
		waitFileSize(t, heldFile, nheld)
		want[c.localPort()] = true
	}
	evs := killAndCollect(t, k, cmd, srv)
	got := map[uint16]bool{}
	for _, ev := range evs {
		if ev.Type != collector.EventConnClosedInflight {
			continue
		}
		if ev.Cause != collector.CauseSigkill || ev.Inflight != collector.InflightStream || ev.NetnsIno != srv ||
			ev.PID != uint32(cmd.Process.Pid) || !want[ev.Remote.Port()] {
			t.Errorf("unexpected %+v", ev)
		}
		got[ev.Remote.Port()] = true
	}
	if n := countType(evs, collector.EventConnClosedInflight, 0); n != held+streams+muxed+bodied || len(got) != held+streams+muxed+bodied {
		t.Fatalf("%d conn_closed_inflight events (%d connections), want exactly %d", n, len(got), held+streams+muxed+bodied)
	}
}

// TestGrpcStreamsKilledBySigkill: a gRPC-Go health server (testdata/
// grpcprobe, its own module) with idle connections that finished one Check,
// connections each holding one Check and connections each with one Watch
// (a server stream), then SIGKILL. Exactly one conn_closed_inflight per
// held Check and per Watch, cause sigkill, kind stream; none for the idle
// ones (which read the client's WINDOW_UPDATEs and BDP PINGs last).
func TestGrpcStreamsKilledBySigkill(t *testing.T) {
	const idle, held, streams = 3, 3, 2
	bin := buildTestdata(t, "grpcprobe")
	l := newLab(t)
	k := openTestKernel(t, Options{MessageProbes: MessageProbesAlways})
	srv := l.server.Inode()
	if err := k.WatchNetns(srv); err != nil {
		t.Fatal(err)
	}
	heldFile := filepath.Join(t.TempDir(), "held")
	addr := serverIP + ":8080"
	cmd := l.startServer(t, 8080, bin, "server", "-addr", addr, "-held", heldFile)
	kinds := runGrpcClient(t, l, bin, "-addr", addr, "-idle", fmt.Sprint(idle), "-holds", fmt.Sprint(held), "-streams", fmt.Sprint(streams))
	waitFileSize(t, heldFile, held)
	evs := killAndCollect(t, k, cmd, srv)
	got := map[string]int{}
	for _, ev := range evs {
		if ev.Type != collector.EventConnClosedInflight {
			continue
		}
		kind := kinds[ev.Remote.Port()]
		if ev.Cause != collector.CauseSigkill || ev.Inflight != collector.InflightStream || ev.NetnsIno != srv ||
			ev.PID != uint32(cmd.Process.Pid) || (kind != "held" && kind != "stream") {
			t.Errorf("unexpected %+v (client connection %q)", ev, kind)
		}
		got[kind]++
	}
	if got["held"] != held || got["stream"] != streams || len(got) != 2 {
		t.Fatalf("conn_closed_inflight per client connection kind: %v, want exactly held:%d stream:%d", got, held, streams)
	}
}

// runGrpcClient runs grpcprobe's client in the client namespace until the
// test ends and returns the kind of each of its connections by local port.
func runGrpcClient(t *testing.T, l *lab, bin string, args ...string) map[uint16]string {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"client"}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := l.client.Start(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	kinds := map[uint16]string{}
	timeout := time.After(10 * time.Second)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatal("grpcprobe client exited before it was ready")
			}
			if line == "ready" {
				return kinds
			}
			var kind string
			var port uint16
			if _, err := fmt.Sscan(line, &kind, &port); err != nil {
				t.Fatalf("grpcprobe client said %q: %v", line, err)
			}
			kinds[port] = kind
		case <-timeout:
			t.Fatal("grpcprobe client not ready within 10s")
		}
	}
}

// TestH2SyscallShapes: the test itself is the server, on raw sockets, and
// reads and writes HTTP/2 in the shapes the parser must follow: frame
// headers split across readv iovecs and across calls, a response ended in
// a writev, recvmsg, one byte per read(2) through the preface. A system
// call it does not follow (recvmmsg) makes the connection fall back to the
// socket rule (bpf/inflight.h): a PING the client sent after the answer
// then counts as a request, where the stream rule would count nothing.
// Each connection is then closed by the server: exactly the ones with an
// open stream (kind stream) or bytes from the client after the server's
// last ones once lost (kind request) report conn_closed_inflight, cause
// close. The message probes are attached before the connections are made.
func TestH2SyscallShapes(t *testing.T) {
	l := newLab(t)
	k := openTestKernel(t, Options{MessageProbes: MessageProbesAlways})
	srv := l.server.Inode()
	if err := k.WatchNetns(srv); err != nil {
		t.Fatal(err)
	}
	lfd := rawListener(t, l, 8080)
	hello := append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), h2Frame(h2FrameSettings, 0, 0, nil)...)
	get := h2Get(1, "/")
	ping := h2Frame(h2FramePing, 0, 0, make([]byte, 8))
	end := h2Frame(h2FrameHeaders, h2FlagEndStream|h2FlagEndHdrs, 1, []byte{0x88}) // :status 200
	cases := []struct {
		name  string
		sent  []byte
		serve func(fd int, c *net.TCPConn) error
		want  collector.InflightKind
	}{
		{"readv split headers", append(hello, get...), func(fd int, _ *net.TCPConn) error {
			return readvExactly(fd, len(hello)+len(get), 5, 7, 64)
		}, collector.InflightStream},
		{"writev ends the stream, recvmsg reads a ping", append(append(hello, get...), ping...), func(fd int, _ *net.TCPConn) error {
			if err := readvExactly(fd, len(hello)+len(get), 30, 4, 64); err != nil {
				return err
			}
			if _, err := unix.Writev(fd, [][]byte{end[:4], end[4:]}); err != nil {
				return err
			}
			return recvmsgExactly(fd, len(ping), 3, 64)
		}, collector.InflightNone},
		{"a byte per read", append(hello, get...), func(fd int, _ *net.TCPConn) error {
			return readvExactly(fd, len(hello)+len(get), 1)
		}, collector.InflightStream},
		{"recvmmsg falls back to the socket rule", append(hello, get...), func(fd int, c *net.TCPConn) error {
			if err := readvExactly(fd, len(hello)+len(get), 64); err != nil {
				return err
			}
			if _, err := unix.Write(fd, end); err != nil {
				return err
			}
			c.SetReadDeadline(time.Now().Add(3 * time.Second))
			if _, err := io.ReadFull(c, make([]byte, len(end))); err != nil {
				return err
			}
			if _, err := c.Write(ping); err != nil {
				return err
			}
			waitAcked(t, c)
			return recvmmsgExactly(fd, len(ping))
		}, collector.InflightRequest},
	}
	want := map[uint16]collector.InflightKind{}
	for _, tc := range cases {
		c := mustDial(t, l)
		if _, err := c.Write(tc.sent); err != nil {
			t.Fatal(err)
		}
		waitAcked(t, c)
		fd, _, err := unix.Accept4(lfd, unix.SOCK_CLOEXEC)
		if err != nil {
			t.Fatal(err)
		}
		if err := tc.serve(fd, c); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		unix.Close(fd)
		if tc.want != collector.InflightNone {
			want[uint16(c.LocalAddr().(*net.TCPAddr).Port)] = tc.want
		}
	}
	evs := drain(k, 500*time.Millisecond)
	got := 0
	for _, ev := range evs {
		if ev.Type != collector.EventConnClosedInflight {
			continue
		}
		got++
		if kind, ok := want[ev.Remote.Port()]; !ok || ev.Inflight != kind || ev.Cause != collector.CauseClose {
			t.Errorf("unexpected %+v", ev)
		}
	}
	if got != len(want) {
		t.Fatalf("%d conn_closed_inflight events, want exactly %d", got, len(want))
	}
}

// rawListener listens on the server's address inside its namespace.
func rawListener(t *testing.T, l *lab, port int) int {
	t.Helper()
	var fd int
	err := l.server.Do(func() error {
		var err error
		if fd, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0); err != nil {
			return err
		}
		addr := &unix.SockaddrInet4{Port: port, Addr: [4]byte(net.ParseIP(serverIP).To4())}
		if err := unix.Bind(fd, addr); err != nil {
			return err
		}
		return unix.Listen(fd, 16)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// readvExactly reads n bytes with readv into iovecs of the given sizes.
func readvExactly(fd, n int, sizes ...int) error {
	for n > 0 {
		var iovs [][]byte
		left := n
		for _, s := range sizes {
			iovs = append(iovs, make([]byte, min(s, left)))
			if left -= min(s, left); left == 0 {
				break
			}
		}
		got, err := unix.Readv(fd, iovs)
		if err != nil {
			return err
		}
		if got == 0 {
			return io.ErrUnexpectedEOF
		}
		n -= got
	}
	return nil
}

// recvmsgExactly reads n bytes with recvmsg into iovecs of the given sizes.
func recvmsgExactly(fd, n int, sizes ...int) error {
	for n > 0 {
		var iovs [][]byte
		for _, s := range sizes {
			iovs = append(iovs, make([]byte, s))
		}
		got, _, _, _, err := unix.RecvmsgBuffers(fd, iovs, nil, 0)
		if err != nil {
			return err
		}
		if got == 0 {
			return io.ErrUnexpectedEOF
		}
		n -= got
	}
	return nil
}

// recvmmsgExactly reads n bytes with recvmmsg(2), a call the parser does
// not follow.
func recvmmsgExactly(fd, n int) error {
	buf := make([]byte, n)
	iov := unix.Iovec{Base: &buf[0]}
	iov.SetLen(n)
	var msg [1]struct {
		hdr unix.Msghdr
		len uint32
		_   [4]byte
	}
	msg[0].hdr.Iov = &iov
	msg[0].hdr.SetIovlen(1)
	for n > 0 {
		got, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(fd), uintptr(unsafe.Pointer(&msg[0])), 1, unix.MSG_WAITALL, 0, 0)
		if errno != 0 {
			return errno
		}
		if got != 1 || msg[0].len == 0 {
			return io.ErrUnexpectedEOF
		}
		n -= int(msg[0].len)
	}
	return nil
}

// buildH2Server builds testdata/h2server (the standard library's HTTP/2
// cleartext server) into the test's temporary directory.
func buildH2Server(t *testing.T) string {
	t.Helper()
	return buildTestdata(t, "h2server")
}

// buildTestdata builds the command in testdata/name (a package of this
// module or a module of its own) into the test's temporary directory.
func buildTestdata(t *testing.T, name string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), name)
	build := exec.Command(goBin, "build", "-o", bin, ".")
	build.Dir = filepath.Join("testdata", name)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building testdata/%s: %v\n%s", name, err, out)
	}
	return bin
}

// waitFileSize waits (bounded) until path holds n bytes.
func waitFileSize(t *testing.T, path string, n int64) {
	t.Helper()
	for i := 0; i < 500; i++ {
		if st, err := os.Stat(path); err == nil && st.Size() == n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s did not reach %d bytes within 5s", path, n)
}

// h2Client speaks just enough HTTP/2 by hand (frames, literal HPACK) to
// control exactly which frames each connection carries.
type h2Client struct {
	c     *net.TCPConn
	mu    sync.Mutex // serializes writes
	ended chan struct{}
	data  chan struct{}
	acks  chan struct{}
	once  [2]sync.Once
}

const (
	h2FrameData         = 0
	h2FrameHeaders      = 1
	h2FrameSettings     = 4
	h2FrameRstStream    = 3
	h2FramePing         = 6
	h2FrameWindowUpdate = 8
	h2FlagEndStream     = 1
	h2FlagAck           = 1
	h2FlagEndHdrs       = 4
)

func dialH2(t *testing.T, l *lab) *h2Client {
	t.Helper()
	h := &h2Client{c: mustDial(t, l), ended: make(chan struct{}), data: make(chan struct{}), acks: make(chan struct{}, 1024)}
	h.write(t, append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), h2Frame(h2FrameSettings, 0, 0, nil)...))
	go h.read()
	return h
}

func h2Frame(typ, flags byte, sid uint32, payload []byte) []byte {
	b := make([]byte, 9, 9+len(payload))
	b[0], b[1], b[2] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
	b[3], b[4] = typ, flags
	binary.BigEndian.PutUint32(b[5:], sid)
	return append(b, payload...)
}

func (h *h2Client) write(t *testing.T, b []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, err := h.c.Write(b); err != nil && t != nil {
		t.Fatal(err)
	}
}

// request sends a GET of path on stream sid, with END_STREAM: HPACK
// indexed :method GET and :scheme http, literal :path and :authority.
func (h *h2Client) request(t *testing.T, sid uint32, path string) {
	h.write(t, h2Get(sid, path))
}

func h2Get(sid uint32, path string) []byte {
	hdr := []byte{0x82, 0x86, 0x44, byte(len(path))}
	hdr = append(hdr, path...)
	hdr = append(hdr, 0x41, byte(len(serverIP)))
	hdr = append(hdr, serverIP...)
	return h2Frame(h2FrameHeaders, h2FlagEndStream|h2FlagEndHdrs, sid, hdr)
}

// post sends a POST of path with a body of size bytes on stream sid, in
// DATA frames of at most 16384 bytes (the default maximum frame size).
func (h *h2Client) post(t *testing.T, sid uint32, path string, size int) {
	hdr := []byte{0x83, 0x86, 0x44, byte(len(path))}
	hdr = append(hdr, path...)
	hdr = append(hdr, 0x41, byte(len(serverIP)))
	hdr = append(hdr, serverIP...)
	b := h2Frame(h2FrameHeaders, h2FlagEndHdrs, sid, hdr)
	for size > 0 {
		n, flags := min(size, 16384), byte(0)
		if n == size {
			flags = h2FlagEndStream
		}
		b = append(b, h2Frame(h2FrameData, flags, sid, make([]byte, n))...)
		size -= n
	}
	h.write(t, b)
}

// read follows the server's frames: acknowledges its SETTINGS and reports
// DATA, the end of a stream and PING acknowledgements.
func (h *h2Client) read() {
	hdr := make([]byte, 9)
	for {
		if _, err := io.ReadFull(h.c, hdr); err != nil {
			return
		}
		n := int(hdr[0])<<16 | int(hdr[1])<<8 | int(hdr[2])
		if _, err := io.CopyN(io.Discard, h.c, int64(n)); err != nil {
			return
		}
		typ, flags := hdr[3], hdr[4]
		switch {
		case typ == h2FrameSettings && flags&h2FlagAck == 0:
			h.write(nil, h2Frame(h2FrameSettings, h2FlagAck, 0, nil))
		case typ == h2FramePing && flags&h2FlagAck != 0:
			select {
			case h.acks <- struct{}{}:
			default:
			}
		}
		if typ == h2FrameData && n > 0 {
			h.once[0].Do(func() { close(h.data) })
		}
		if (typ == h2FrameData || typ == h2FrameHeaders) && flags&h2FlagEndStream != 0 {
			h.once[1].Do(func() { close(h.ended) })
		}
	}
}

// pingEvery sends a PING every period until stop (at most 400 of them).
func (h *h2Client) pingEvery(period time.Duration, stop <-chan struct{}) {
	for i := 0; i < 400; i++ {
		h.write(nil, h2Frame(h2FramePing, 0, 0, make([]byte, 8)))
		select {
		case <-stop:
			return
		case <-time.After(period):
		}
	}
}

func (h *h2Client) wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(3 * time.Second):
		t.Fatalf("no %s within 3s", what)
	}
}

func (h *h2Client) waitAcks(t *testing.T, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		h.wait(t, h.acks, fmt.Sprintf("PING acknowledgement %d", i+1))
	}
}

func (h *h2Client) localPort() uint16 { return uint16(h.c.LocalAddr().(*net.TCPAddr).Port) }

// BenchmarkH2ProbeRuntime reports the kernel's run time of the read and
// write probes (sock_recv, sock_send) per round trip of 17-byte messages
// over loopback, between two sockets of one namespace: the accepted end is
// untracked (namespace not watched), tracked with HTTP/1-like bytes (one
// preface check, then an early return) or tracked speaking HTTP/2 (PING in,
// PING ACK out, each frame header parsed). The connecting end is never
// tracked: each round trip has two tracked and two untracked runs.
//
//	go test -run '^$' -bench H2ProbeRuntime -benchtime 1x ./collector/kernel/
func BenchmarkH2ProbeRuntime(b *testing.B) {
	const trips = 20000
	stats, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		b.Fatal(err)
	}
	defer stats.Close()
	ns := newChurnNetns(b)
	k := openTestKernel(b, Options{MessageProbes: MessageProbesAlways})
	ping := h2Frame(h2FramePing, 0, 0, make([]byte, 8))
	pong := h2Frame(h2FramePing, h2FlagAck, 0, make([]byte, 8))
	modes := []struct {
		name           string
		watch          bool
		hello, in, out []byte
	}{
		{"unwatched", false, nil, ping, pong},
		{"http1", true, nil, []byte("GET / HTTP/1.1\r\n\r\n")[:17], pong},
		{"h2", true, append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), h2Frame(h2FrameSettings, 0, 0, nil)...), ping, pong},
	}
	for b.Loop() {
		for _, m := range modes {
			if m.watch {
				if err := k.WatchNetns(ns.Inode()); err != nil {
					b.Fatal(err)
				}
			}
			before := k.probeRuntime(b, "sock_recv", "sock_send")
			if err := ns.Do(func() error { return roundTrips(m.hello, m.in, m.out, trips) }); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(k.probeRuntime(b, "sock_recv", "sock_send")-before)/trips, "bpf_ns/trip_"+m.name)
		}
	}
}

// probeRuntime sums the kernel's run time of the named programs.
func (k *Kernel) probeRuntime(b *testing.B, names ...string) time.Duration {
	var sum time.Duration
	for _, c := range append(k.colls, k.msg.coll) {
		for _, name := range names {
			if p := c.Programs[name]; p != nil {
				st, err := p.Stats()
				if err != nil {
					b.Fatal(err)
				}
				sum += st.Runtime
			}
		}
	}
	return sum
}

// roundTrips connects over loopback, sends hello, then n times sends in
// and answers out on the accepted end, with raw syscalls on one thread.
func roundTrips(hello, in, out []byte, n int) error {
	lfd, addr, err := loopbackListener()
	if err != nil {
		return err
	}
	defer unix.Close(lfd)
	cfd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(cfd)
	if err := unix.Connect(cfd, addr); err != nil {
		return err
	}
	afd, _, err := unix.Accept4(lfd, unix.SOCK_CLOEXEC)
	if err != nil {
		return err
	}
	defer unix.Close(afd)
	buf := make([]byte, 64)
	if len(hello) > 0 {
		if _, err := unix.Write(cfd, hello); err != nil {
			return err
		}
		if _, err := io.ReadFull(fdReader(afd), buf[:len(hello)]); err != nil {
			return err
		}
	}
	for i := 0; i < n; i++ {
		if _, err := unix.Write(cfd, in); err != nil {
			return err
		}
		if _, err := io.ReadFull(fdReader(afd), buf[:len(in)]); err != nil {
			return err
		}
		if _, err := unix.Write(afd, out); err != nil {
			return err
		}
		if _, err := io.ReadFull(fdReader(cfd), buf[:len(out)]); err != nil {
			return err
		}
	}
	return nil
}

type fdReader int

func (f fdReader) Read(p []byte) (int, error) { return unix.Read(int(f), p) }

// TestMessageProbesAttachAtRunTime: message probes on demand. An HTTP/2
// connection opened while they are detached is judged by the socket rule:
// idle after its answer but for the client's WINDOW_UPDATE, it counts as in
// flight (kind request or unread, the documented cost of not following
// HTTP/2). Attached at run time, they follow the connections opened from
// then on exactly: the same idle shape counts nothing, a held request
// after a finished one counts as a stream. Then SIGKILL: exactly 2.
func TestMessageProbesAttachAtRunTime(t *testing.T) {
	bin := buildH2Server(t)
	l := newLab(t)
	k := openTestKernel(t, Options{MessageProbes: MessageProbesOnDemand})
	requireMessageProbes(t, k, ProbeDetached)
	srv := l.server.Inode()
	if err := k.WatchNetns(srv); err != nil {
		t.Fatal(err)
	}
	heldFile := filepath.Join(t.TempDir(), "held")
	cmd := l.startServer(t, 8080, bin, "-addr", serverIP+":8080", "-held", heldFile)
	unfollowed := dialH2(t, l)
	unfollowed.idleAfterWindowUpdate(t)
	if err := k.SetMessageProbes(true); err != nil {
		t.Fatal(err)
	}
	requireMessageProbes(t, k, ProbeAttached)
	dialH2(t, l).idleAfterWindowUpdate(t)
	held := dialH2(t, l)
	held.holdAfterAnswer(t, heldFile, 1)
	want := map[uint16]bool{unfollowed.localPort(): false, held.localPort(): true}
	requireInflightStreams(t, killAndCollect(t, k, cmd, srv), want)
}

// TestMessageProbesDetachAtRunTime: detaching the message probes hands the
// connections they followed to the socket rule: an idle one whose client
// sent a WINDOW_UPDATE last now counts as in flight, and a held stream
// counts by its bytes (the client's HEADERS came after the server's last
// frame), kind request or unread. Then SIGKILL: exactly 2.
func TestMessageProbesDetachAtRunTime(t *testing.T) {
	bin := buildH2Server(t)
	l := newLab(t)
	k := openTestKernel(t, Options{MessageProbes: MessageProbesAlways})
	requireMessageProbes(t, k, ProbeAttached)
	srv := l.server.Inode()
	if err := k.WatchNetns(srv); err != nil {
		t.Fatal(err)
	}
	heldFile := filepath.Join(t.TempDir(), "held")
	cmd := l.startServer(t, 8080, bin, "-addr", serverIP+":8080", "-held", heldFile)
	idle := dialH2(t, l)
	idle.idleAfterWindowUpdate(t)
	held := dialH2(t, l)
	held.holdAfterAnswer(t, heldFile, 1)
	if err := k.SetMessageProbes(false); err != nil {
		t.Fatal(err)
	}
	requireMessageProbes(t, k, ProbeDetached)
	want := map[uint16]bool{idle.localPort(): false, held.localPort(): false}
	requireInflightStreams(t, killAndCollect(t, k, cmd, srv), want)
}

func requireMessageProbes(t *testing.T, k *Kernel, want ProbeState) {
	t.Helper()
	n := 0
	for _, p := range k.Probes() {
		if p.Name == "sock_recv" || p.Name == "sock_send" {
			n++
			if p.State != want || !p.Optional || !p.Attached() {
				t.Fatalf("probe %+v, want state %s, optional", p, want)
			}
		}
	}
	if n != 2 || k.MessageProbesAttached() != (want == ProbeAttached) {
		t.Fatalf("%d message probes, attached %v; want 2 %s", n, k.MessageProbesAttached(), want)
	}
}

// requireInflightStreams checks the conn_closed_inflight events: exactly
// one per connection of want (by client port), cause sigkill, kind stream
// when want says so, else request or unread (the socket rule).
func requireInflightStreams(t *testing.T, evs []collector.Event, want map[uint16]bool) {
	t.Helper()
	got := map[uint16]int{}
	for _, ev := range evs {
		if ev.Type != collector.EventConnClosedInflight {
			continue
		}
		stream, ok := want[ev.Remote.Port()]
		kindOK := ev.Inflight == collector.InflightStream
		if !stream {
			kindOK = ev.Inflight == collector.InflightRequest || ev.Inflight == collector.InflightUnread
		}
		if !ok || !kindOK || ev.Cause != collector.CauseSigkill {
			t.Errorf("unexpected %+v", ev)
		}
		got[ev.Remote.Port()]++
	}
	if n := countType(evs, collector.EventConnClosedInflight, 0); n != len(want) || len(got) != len(want) {
		t.Fatalf("%d conn_closed_inflight events (%d connections), want exactly %d", n, len(got), len(want))
	}
}

// idleAfterWindowUpdate: one answered request, then a WINDOW_UPDATE the
// server's kernel acknowledged and the server never answers.
func (h *h2Client) idleAfterWindowUpdate(t *testing.T) {
	t.Helper()
	h.request(t, 1, "/")
	h.wait(t, h.ended, "the answer to /")
	h.write(t, h2Frame(h2FrameWindowUpdate, 0, 0, []byte{0, 0, 4, 0}))
	waitAcked(t, h.c)
}

// holdAfterAnswer: one answered request, then one the server holds (the
// nheld-th held request of the server).
func (h *h2Client) holdAfterAnswer(t *testing.T, heldFile string, nheld int64) {
	t.Helper()
	h.request(t, 1, "/")
	h.wait(t, h.ended, "the answer to /")
	h.request(t, 3, "/slow")
	waitFileSize(t, heldFile, nheld)
}
