package kube

import (
	"errors"
	"testing"
	"time"
)

// A watch failing from f1 (refused twice, then opened): deliveries while it
// fails and within catchUp of its opening carry f1; the first one after
// that carries nothing, and so does everything after.
func TestBlindWindow(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	refused := errors.New("connection refused")
	var b blindWindow
	steps := []struct {
		what string
		do   func()
		at   time.Time
		want time.Time
	}{
		{"healthy", func() { b.watchCalled(nil, at(0)) }, at(1), time.Time{}},
		{"refused", func() { b.watchCalled(refused, at(10)) }, at(11), at(10)},
		{"refused again", func() { b.watchCalled(refused, at(20)) }, at(21), at(10)},
		{"relist before the watch opens", func() {}, at(40), at(10)},
		{"opened", func() { b.watchCalled(nil, at(41)) }, at(41).Add(catchUp), at(10)},
		{"caught up", func() {}, at(41).Add(catchUp + time.Millisecond), time.Time{}},
		{"opened again, healthy", func() { b.watchCalled(nil, at(50)) }, at(50.5), time.Time{}},
		{"failed through the handler", func() { b.failed(at(60)) }, at(61), at(60)},
	}
	for _, s := range steps {
		s.do()
		if got := b.blindSince(s.at); !got.Equal(s.want) {
			t.Errorf("%s: blindSince(%v) = %v, want %v", s.what, s.at.Sub(t0), got, s.want)
		}
	}
}
