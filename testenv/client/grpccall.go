package client

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	"github.com/drainwatch/drainwatch/testenv/workload"
)

// grpcCall is one call of a GRPC workload, on its own connection.
type grpcCall struct {
	GRPCCall
	sent     chan struct{}
	sentOnce func()
}

func (c *grpcCall) run(ctx context.Context, g GRPC) {
	c.Start = time.Now()
	defer func() { c.End = time.Now() }()
	c.sentOnce = sync.OnceFunc(func() { close(c.sent) })
	defer c.sentOnce()
	conn, err := grpc.NewClient("passthrough:///"+g.Target,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return g.Dial(ctx, "tcp", addr) }),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: g.KeepaliveTime, Timeout: time.Second, PermitWithoutStream: true}),
		grpc.WithStatsHandler(sentHook{c.sentOnce}))
	if err != nil {
		c.end(err)
		return
	}
	defer conn.Close()
	health := grpc_health_v1.NewHealthClient(conn)
	switch c.Kind {
	case UnaryCall:
		ctx, cancel := context.WithTimeout(ctx, g.Hold+g.Duration)
		defer cancel()
		_, err := health.Check(ctx, &grpc_health_v1.HealthCheckRequest{Service: workload.SlowService(g.Hold)})
		if err == nil {
			c.Messages++
		}
		c.end(err)
	case StreamCall:
		c.watch(ctx, health, g.Duration)
	default:
		c.idle(ctx, conn, g.Duration)
	}
}

// watch receives statuses until the stream ends or Duration passes (then
// the client ends it: codes.DeadlineExceeded).
func (c *grpcCall) watch(ctx context.Context, health grpc_health_v1.HealthClient, d time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	stream, err := health.Watch(ctx, &grpc_health_v1.HealthCheckRequest{})
	if err != nil {
		c.end(err)
		return
	}
	for {
		if _, err := stream.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				err = nil // the server ended the stream with status OK
			}
			c.end(err)
			return
		}
		c.Messages++
	}
}

// idle connects, then watches the connection's state without a call until
// d has passed; leaving READY is recorded as Lost.
func (c *grpcCall) idle(ctx context.Context, conn *grpc.ClientConn, d time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	conn.Connect()
	for s := conn.GetState(); s != connectivity.Ready; s = conn.GetState() {
		if !conn.WaitForStateChange(ctx, s) {
			c.Code, c.Err = codes.Unavailable, "never ready: "+s.String()
			return
		}
	}
	c.sentOnce()
	if conn.WaitForStateChange(ctx, connectivity.Ready) {
		c.Lost = true
		<-ctx.Done() // still no call: the record ends at Duration like the others
	}
}

func (c *grpcCall) end(err error) {
	c.Code = status.Code(err)
	if err != nil {
		c.Err = err.Error()
	}
}

// sentHook signals once a call's request message is handed to the
// transport, so Start returns with every call on its way to the server.
type sentHook struct{ sent func() }

func (h sentHook) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

func (h sentHook) HandleRPC(_ context.Context, s stats.RPCStats) {
	if _, ok := s.(*stats.OutPayload); ok {
		h.sent()
	}
}

func (h sentHook) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }

func (h sentHook) HandleConn(context.Context, stats.ConnStats) {}
