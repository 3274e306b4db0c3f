package workload

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
)

// WatchEvery is how often a Watch stream sends a status.
const WatchEvery = 100 * time.Millisecond

// SlowService is the health service name that makes Check hold for d before
// answering: "slow:3s". Any other name (or "") answers at once.
func SlowService(d time.Duration) string { return "slow:" + d.String() }

// runGRPC serves the standard health service (grpc_health_v1) on ln — no
// protoc needed, the client is in grpc-go too. Check is the unary call,
// held for the duration its service name asks; Watch is the server stream.
// At the stop signal Check answers NOT_SERVING for DrainDelay, then
// GracefulStop, which waits for calls and streams, at most ShutdownTimeout.
func (s *Server) runGRPC(ctx context.Context, ln net.Listener, stop <-chan os.Signal) error {
	g := grpc.NewServer(grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
		// Clients ping idle connections; the default policy (5 min, not
		// without streams) would answer them with GOAWAY too_many_pings.
		MinTime: 50 * time.Millisecond, PermitWithoutStream: true,
	}))
	grpc_health_v1.RegisterHealthServer(g, &health{s: s})
	served := make(chan error, 1)
	go func() { served <- g.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serving gRPC: %w", err)
	case <-ctx.Done():
		g.Stop()
		return nil
	case sig := <-stop:
		s.log.Info().Str("event", "signal").Str("signal", sig.String()).Msg("stop signal received")
	}
	close(s.stopping)
	s.drain()
	return s.gracefulStop(g)
}

func (s *Server) gracefulStop(g *grpc.Server) error {
	s.log.Info().Str("event", "shutdown_begin").Msg("GracefulStop: closing listener, finishing calls")
	done := make(chan struct{})
	go func() { g.GracefulStop(); close(done) }()
	timer := time.NewTimer(s.cfg.ShutdownTimeout)
	defer timer.Stop()
	select {
	case <-done:
		s.log.Info().Str("event", "shutdown_done").Msg("all calls finished")
		return nil
	case <-timer.C:
		g.Stop()
		s.log.Warn().Str("event", "shutdown_timeout").Msg("calls cut")
		return fmt.Errorf("shutdown: gRPC calls still open after %s", s.cfg.ShutdownTimeout)
	}
}

type health struct {
	grpc_health_v1.UnimplementedHealthServer
	s *Server
}

// Check answers after the hold its service name asks for (SlowService).
func (h *health) Check(ctx context.Context, req *grpc_health_v1.HealthCheckRequest) (*grpc_health_v1.HealthCheckResponse, error) {
	d, err := checkHold(req.GetService())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	return &grpc_health_v1.HealthCheckResponse{Status: h.status()}, nil
}

// Watch sends the status every WatchEvery until the client cancels, the
// server dies, maxSlow passes, or (EndStreams) the stop signal arrives.
func (h *health) Watch(_ *grpc_health_v1.HealthCheckRequest, stream grpc.ServerStreamingServer[grpc_health_v1.HealthCheckResponse]) error {
	tick := time.NewTicker(WatchEvery)
	defer tick.Stop()
	end := time.NewTimer(maxSlow)
	defer end.Stop()
	ending := h.s.stopping
	if !h.s.cfg.EndStreams {
		ending = nil
	}
	for {
		if err := stream.Send(&grpc_health_v1.HealthCheckResponse{Status: h.status()}); err != nil {
			return err
		}
		select {
		case <-stream.Context().Done():
			return status.FromContextError(stream.Context().Err()).Err()
		case <-ending:
			return nil
		case <-end.C:
			return nil
		case <-tick.C:
		}
	}
}

func (h *health) status() grpc_health_v1.HealthCheckResponse_ServingStatus {
	if h.s.draining.Load() {
		return grpc_health_v1.HealthCheckResponse_NOT_SERVING
	}
	return grpc_health_v1.HealthCheckResponse_SERVING
}

func checkHold(service string) (time.Duration, error) {
	v, ok := strings.CutPrefix(service, "slow:")
	if !ok {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 || d > maxSlow {
		return 0, errors.Join(fmt.Errorf("service %q: want slow:<duration> from 0 to %s", service, maxSlow), err)
	}
	return d, nil
}
