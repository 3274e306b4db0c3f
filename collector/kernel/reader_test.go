package kernel

import (
	"testing"

	"github.com/drainwatch/drainwatch/collector"
)

// TestRecordPathAllocs: what the reader does per ring-buffer record —
// decode, count, hand to the Events channel or drop when it is full, or wait
// for room inside the backlog — allocates nothing, for every event type and
// both address families. (BenchmarkReaderSteadyState measures the same with
// the kernel; this runs in every go test, without root.)
func TestRecordPathAllocs(t *testing.T) {
	const buffer = 4
	k := &Kernel{events: make(chan collector.Event, buffer), stop: make(chan struct{})}
	var records [][]byte
	for _, typ := range collector.EventTypes() {
		for _, family := range []uint16{afInet, afInet6} {
			r := rawEvent{Type: uint8(typ), TsNs: 1, Family: family, Lport: 8080, Rport: 40000,
				Pid: 7, Tid: 8, Signal: 15, ExitStatus: 15, Comm: commOf("nginx"), SenderComm: commOf("kubelet")}
			copy(r.Laddr[:], []byte{10, 251, 0, 2})
			copy(r.Raddr[:], []byte{10, 251, 0, 1})
			records = append(records, recordOf(&r))
		}
	}
	// A backlog that every record read belongs to: the consumer position
	// stays at its end.
	k.backlog = backlog{ring: &ringPositions{cons: new(uintptr), prod: new(uintptr)}}
	var ev collector.Event
	paths := map[string]func(raw []byte){
		"delivered": func(raw []byte) {
			k.handleRecord(raw, &ev, false)
			<-k.events
		},
		"dropped": func(raw []byte) {
			for len(k.events) < buffer {
				k.events <- collector.Event{}
			}
			k.handleRecord(raw, &ev, false)
		},
		"backlog": func(raw []byte) {
			for len(k.events) > 0 {
				<-k.events
			}
			if !k.handleRecord(raw, &ev, true) {
				t.Fatal("a backlog record left the backlog")
			}
		},
	}
	for name, path := range paths {
		for len(k.events) > 0 {
			<-k.events
		}
		before := k.dropped.Load()
		allocs := testing.AllocsPerRun(100, func() {
			for _, raw := range records {
				path(raw)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per %d records, want 0", name, allocs, len(records))
		}
		wantDropped := uint64(0)
		if name == "dropped" {
			wantDropped = 101 * uint64(len(records)) // AllocsPerRun runs once more to warm up
		}
		if got := k.dropped.Load() - before; got != wantDropped {
			t.Errorf("%s: %d dropped, want %d", name, got, wantDropped)
		}
	}
	if k.invalid.Load() != 0 {
		t.Errorf("%d records did not decode", k.invalid.Load())
	}
}
