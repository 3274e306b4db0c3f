package kernel

import (
	"net/netip"
	"testing"
	"time"
	"unsafe"

	"github.com/drainwatch/drainwatch/collector"
)

// recordOf returns the bytes the BPF side would write for r.
func recordOf(r *rawEvent) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(r)), rawEventSize)
}

func commOf(s string) (c [16]int8) {
	for i := 0; i < len(s) && i < 15; i++ {
		c[i] = int8(s[i])
	}
	return c
}

func TestDecodeAccept(t *testing.T) {
	r := rawEvent{Type: uint8(collector.EventAccept), TsNs: 5, Netns: 4026532000, Cookie: 77,
		Family: afInet, Lport: 8080, Rport: 40000, Comm: commOf("nginx")}
	copy(r.Laddr[:], []byte{10, 251, 0, 2})
	copy(r.Raddr[:], []byte{10, 251, 0, 1})
	var ev collector.Event
	if err := decodeEvent(recordOf(&r), wallClock{offsetNs: 1_000_000_000}, &ev); err != nil {
		t.Fatal(err)
	}
	want := collector.Event{Type: collector.EventAccept, Time: time.Unix(1, 5), NetnsIno: 4026532000, SockCookie: 77,
		Local: netip.MustParseAddrPort("10.251.0.2:8080"), Remote: netip.MustParseAddrPort("10.251.0.1:40000")}
	copy(want.Comm[:], "nginx")
	if ev != want {
		t.Fatalf("got %+v\nwant %+v", ev, want)
	}
}

func TestDecodeIPv6Unmaps(t *testing.T) {
	r := rawEvent{Type: uint8(collector.EventRefused), Family: afInet6, Lport: 80, Rport: 1234}
	a := netip.MustParseAddr("::ffff:10.251.0.2").As16()
	r.Laddr = a
	b := netip.MustParseAddr("fd00::1").As16()
	r.Raddr = b
	var ev collector.Event
	if err := decodeEvent(recordOf(&r), wallClock{}, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Local.String() != "10.251.0.2:80" || ev.Remote.String() != "[fd00::1]:1234" {
		t.Fatalf("local %v remote %v", ev.Local, ev.Remote)
	}
}

func TestDecodeExitStatus(t *testing.T) {
	for _, tc := range []struct {
		status   int32
		code     int32
		sig      uint32
		scenario string
	}{
		{9, 137, 9, "SIGKILL"},
		{15, 143, 15, "SIGTERM default action"},
		{0x80 | 11, 139, 11, "SIGSEGV with core dump"},
		{0, 0, 0, "clean exit"},
		{3 << 8, 3, 0, "exit(3)"},
	} {
		r := rawEvent{Type: uint8(collector.EventExit), ExitStatus: tc.status}
		var ev collector.Event
		if err := decodeEvent(recordOf(&r), wallClock{}, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.ExitCode != tc.code || ev.ExitSignal != tc.sig {
			t.Errorf("%s: code %d signal %d, want %d %d", tc.scenario, ev.ExitCode, ev.ExitSignal, tc.code, tc.sig)
		}
	}
}

func TestDecodeSignal(t *testing.T) {
	r := rawEvent{Type: uint8(collector.EventSignal), Signal: 15, Pid: 42, SenderPid: 7, TargetInit: 1,
		SignalResult: uint32(collector.SignalIgnored), SenderComm: commOf("containerd-shim")}
	var ev collector.Event
	if err := decodeEvent(recordOf(&r), wallClock{}, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Signal != 15 || ev.PID != 42 || ev.SenderPID != 7 || !ev.TargetInit ||
		ev.SignalResult != collector.SignalIgnored || ev.SenderComm.String() != "containerd-shim" {
		t.Fatalf("got %+v", ev)
	}
}

func TestDecodeShort(t *testing.T) {
	var ev collector.Event
	if err := decodeEvent(make([]byte, rawEventSize-1), wallClock{}, &ev); err != errShortRecord {
		t.Fatalf("err = %v", err)
	}
}

// FuzzDecode: any record either fails the length check or decodes without
// panicking, with addresses valid exactly when the family is known.
func FuzzDecode(f *testing.F) {
	r := rawEvent{Type: uint8(collector.EventAccept), Family: afInet, Lport: 80}
	f.Add(append([]byte(nil), recordOf(&r)...))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		var ev collector.Event
		err := decodeEvent(b, wallClock{}, &ev)
		if (err != nil) != (len(b) < rawEventSize) {
			t.Fatalf("len %d: err %v", len(b), err)
		}
		if err != nil {
			return
		}
		fam := (*rawEvent)(unsafe.Pointer(&b[0])).Family
		known := fam == afInet || fam == afInet6
		if ev.Local.IsValid() != known || ev.Remote.IsValid() != known {
			t.Fatalf("family %d: local %v remote %v", fam, ev.Local, ev.Remote)
		}
	})
}

// BenchmarkDecode reports ns/event and allocs/event (must be 0).
func BenchmarkDecode(b *testing.B) {
	r := rawEvent{Type: uint8(collector.EventAccept), Family: afInet6, Lport: 80, Rport: 1234, Comm: commOf("python3")}
	rec := recordOf(&r)
	var ev collector.Event
	b.ReportAllocs()
	for b.Loop() {
		if err := decodeEvent(rec, wallClock{}, &ev); err != nil {
			b.Fatal(err)
		}
	}
}
