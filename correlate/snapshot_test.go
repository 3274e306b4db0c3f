package correlate

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

func flatten(evs []any) []any {
	var out []any
	for _, e := range evs {
		if inner, ok := e.([]any); ok {
			out = append(out, flatten(inner)...)
		} else {
			out = append(out, e)
		}
	}
	return out
}

// restart runs evs[:cut] in one correlator, persists its snapshot as JSON,
// restores it in a new one and feeds it either every event again (the
// daemon replaying what it has) or only the rest. ok is false when the
// rest starts with kernel events no later than the snapshot's watermark:
// without a restart in between those cannot be told from replays (a real
// restart takes longer than a nanosecond).
func restart(tb testing.TB, evs []any, cut int, replayAll bool) (c *Correlator, ok bool) {
	tb.Helper()
	before := New(Config{})
	feed(before, evs[:cut])
	snap, err := before.Snapshot()
	if err != nil {
		tb.Fatal(err)
	}
	if !replayAll && kernelAtOrBefore(evs[cut:], snap.KernelWatermark.At) {
		return nil, false
	}
	b, err := json.Marshal(snap)
	if err != nil {
		tb.Fatal(err)
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		tb.Fatal(err)
	}
	after := New(Config{})
	if err := after.Restore(s); err != nil {
		tb.Fatal(err)
	}
	if replayAll {
		feed(after, evs)
	} else {
		feed(after, evs[cut:])
	}
	return after, true
}

func kernelAtOrBefore(evs []any, at time.Time) bool {
	for _, e := range evs {
		if k, ok := e.(collector.Event); ok && !k.Time.After(at) {
			return true
		}
	}
	return false
}

// Snapshot and restore at every point of each scenario, then replay: the
// termination equals the one of an uninterrupted run, field for field.
func TestRestoreMidTerminationCountsNothingTwice(t *testing.T) {
	scenarios := map[string]struct {
		events []any
		tick   time.Time
	}{
		"naive":         {naive(), ms(7600)},
		"protocol":      {protocol(true), ms(7600)},
		"ignore-term":   {ignoreTerm(), ms(8500)},
		"forking":       {forking(), ms(7500)},
		"delete-first":  {deleteBeforeKernel(), ms(5500)},
		"prestop-kills": {prestopKillsServer(true), ms(7000)},
		"kernel-ahead":  {kernelAhead(), ms(5700)},
	}
	for name, sc := range scenarios {
		evs := flatten(sc.events)
		want := finish(t, New(Config{}), evs, sc.tick)
		for cut := 1; cut < len(evs); cut++ {
			for _, replayAll := range []bool{true, false} {
				t.Run(fmt.Sprintf("%s/cut%d/replay=%v", name, cut, replayAll), func(t *testing.T) {
					c, ok := restart(t, evs, cut, replayAll)
					if !ok {
						t.Skip("events at the watermark's time without a restart between")
					}
					got := finish(t, c, nil, sc.tick)
					if !reflect.DeepEqual(got, want) {
						t.Errorf("after restore:\n got %+v\nwant %+v", got, want)
					}
				})
			}
		}
	}
}

// The daemon reports the time it was down as a kernel gap: a termination
// that overlaps it is partial, never clean.
func TestDowntimeMakesPartial(t *testing.T) {
	evs := flatten(protocol(true))
	cut := 5 // just after the stop signal
	c, _ := restart(t, evs, cut, false)
	feed(c, []any{gap{"daemon_down", ms(0), ms(400)}})
	got := finish(t, c, nil, ms(7600))
	if !got.Partial || got.Outcome != OutcomePartial || len(got.Diagnoses) != 0 {
		t.Errorf("partial %v %v outcome %s diagnoses %v, want partial without clean", got.Partial, got.PartialReasons, got.Outcome, codes(got))
	}
}
