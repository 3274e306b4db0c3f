package correlate

import (
	"testing"
	"time"
)

// Messages leave out what a missing mark cannot tell instead of printing
// a placeholder, and say "before" for a mark that preceded its reference.
func TestDiagnosisMessagesWithMissingMarks(t *testing.T) {
	seen := Marks{DeletionSeen: ms(0)}
	tests := []struct {
		name, code, message, fix string
		t                        Termination
	}{
		{"listener never seen closing", DiagListenerClosedEarly,
			"6 connections refused (6 after the stop signal, 0 before it): the listener was never seen closing while routing still sent traffic until 0.6s after the deletion",
			"add preStop sleep ≥ 2s: routing took 0.6s",
			Termination{Marks: seen, Counts: Counts{RefusedAfterSigterm: 6}, LastConnAttempt: ms(600)}},
		{"listener closed before the deletion was seen", DiagListenerClosedEarly,
			"2 connections refused (2 after the stop signal, 0 before it): the listener closed 0.003s before the deletion while routing still sent traffic until 0.9s after the deletion",
			"add preStop sleep ≥ 2s: routing took 0.9s",
			Termination{Marks: Marks{DeletionSeen: ms(0), ListenerClosed: ms(-3)}, Counts: Counts{RefusedAfterSigterm: 2}, LastConnAttempt: ms(900)}},
		{"no connection attempt after the deletion", DiagListenerClosedEarly,
			"1 connections refused (0 after the stop signal, 1 before it): the listener closed 0.1s after the deletion",
			"add preStop sleep ≥ 1s",
			Termination{Marks: Marks{DeletionSeen: ms(0), ListenerClosed: ms(100)}, Counts: Counts{RefusedBeforeSigterm: 1}, LastConnAttempt: ms(-5)}},
		{"SIGKILL with no stop signal seen", DiagGraceExceeded,
			"still running when the grace period of 5s ran out",
			"finish the drain within the grace period or raise terminationGracePeriodSeconds above 5s",
			Termination{Marks: Marks{DeletionSeen: ms(0), Sigkill: ms(7000)}, GracePeriod: 5 * time.Second}},
		{"requests killed, no SIGKILL nor stop signal seen", DiagRequestsKilled,
			"SIGKILL killed 2 in-flight requests",
			"raise terminationGracePeriodSeconds above preStop + the longest request, or bound requests below the remaining grace",
			Termination{Marks: seen, Counts: Counts{RequestsKilledBySigkill: 2}}},
		{"preStop failed, no Killing seen", DiagPrestopFailed,
			`the preStop hook failed (kubelet: "PreStopHook failed"); the stop signal followed at once`,
			"check that the preStop command exists in the image, or use the preStop sleep action",
			Termination{Marks: Marks{DeletionSeen: ms(-10), PrestopFailed: ms(-4), StopSignal: ms(0)}}},
		{"stop signal ignored, target unnamed", DiagStopSignalIgnored,
			"SIGTERM to PID 1 had no effect for 3s until SIGKILL: no listener closed, no exit",
			"PID 1 ignores signals it has no handler for: exec the server from the shell (exec ./server), run an init such as tini, or handle the signal",
			Termination{Marks: Marks{DeletionSeen: ms(-10), StopSignal: ms(0), Sigkill: ms(3000)}, StopSignal: sigterm}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := diagnosis(Termination{Diagnoses: diagnose(tc.t, "PreStopHook failed", New(Config{}).cfg)}, tc.code)
			if got.Message != tc.message || got.Fix != tc.fix {
				t.Errorf("%s:\n got %q | %q\nwant %q | %q", tc.code, got.Message, got.Fix, tc.message, tc.fix)
			}
		})
	}
}

func TestSecs(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{34900 * time.Nanosecond, "0.0000349s"}, {890 * time.Millisecond, "0.89s"},
		{30 * time.Second, "30s"}, {1234500 * time.Millisecond, "1230s"}, {0, "0s"},
	} {
		if got := FormatSeconds(tc.d); got != tc.want {
			t.Errorf("FormatSeconds(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}
