package bench

import (
	"context"
	"errors"

	"github.com/drainwatch/drainwatch/testenv/lab"
)

// overhead runs the interleaved rounds. The server runs on node 1; "nothing
// watched" runs node 2's daemon, which loads and attaches every probe but
// owns no pod of the load.
func (b *bench) overhead(ctx context.Context) ([]Sample, error) {
	if b.cfg.Rounds == 0 {
		return nil, nil // RSS only: --rounds 0
	}
	if err := deployServer(ctx, b.c, b.c.NodeNames[0]); err != nil {
		return nil, err
	}
	var out []Sample
	for round := range b.cfg.Rounds {
		for _, mode := range roundOrder(round) {
			s, err := b.runMode(ctx, round, mode)
			if err != nil {
				return out, err
			}
			out = append(out, s...)
		}
		b.progress("round %d/%d done", round+1, b.cfg.Rounds)
	}
	return out, nil
}

// roundOrder rotates the first three modes from round to round so that
// none always runs first after a pause; the terminating pod comes last as
// its measurement ends that pod.
func roundOrder(round int) []Mode {
	first := Modes[:3]
	out := make([]Mode, 0, len(Modes))
	for i := range first {
		out = append(out, first[(round+i)%len(first)])
	}
	return append(out, ModeTerminating)
}

// runMode sets mode up, runs both loads and tears it down.
func (b *bench) runMode(ctx context.Context, round int, mode Mode) ([]Sample, error) {
	srv, err := readyServer(ctx, b.c, b.cgroupRoot)
	if err != nil {
		return nil, err
	}
	var d *lab.Daemon
	switch mode {
	case ModeIdle:
		d, err = b.startDaemon(ctx, b.c.NodeNames[1])
	case ModeWatched, ModeTerminating:
		d, err = b.startDaemon(ctx, b.c.NodeNames[0])
	}
	if err != nil {
		return nil, err
	}
	if mode == ModeTerminating {
		err = srv.startTerminating(ctx, b.c)
	}
	var out []Sample
	for _, closeConns := range []bool{true, false} {
		if err != nil {
			break
		}
		var s Sample
		s, err = measure(ctx, b.c.Fabric, srv, d, Load{Close: closeConns, Duration: b.cfg.Duration,
			Connections: b.cfg.Connections, Threads: b.cfg.Threads})
		s.Round, s.Mode = round, mode
		out = append(out, s)
	}
	if d != nil {
		_ = d.Stop()
	}
	if mode == ModeTerminating {
		err = errors.Join(err, srv.forceDelete(ctx, b.c))
	}
	return out, err
}
