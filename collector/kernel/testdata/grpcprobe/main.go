// Command grpcprobe is the gRPC server and client of the collector's kernel
// tests, in its own module so the product's go.mod needs no gRPC.
//
//	grpcprobe server -addr A -held F
//	grpcprobe client -addr A -idle I -held K -streams S
//
// The server is the standard health service with two changes: Check of the
// service "slow" appends one byte to F and then holds the call until the
// client goes away; Watch sends a status every 50 ms until then. The client
// opens one connection per call: I connections that finished one Check,
// K connections with a held Check("slow"), S connections with a Watch whose
// first status arrived. It prints "<kind> <local port>" per connection,
// then "ready", and waits until stdin closes or it is killed.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

func main() {
	if len(os.Args) < 2 {
		log.Fatal("usage: grpcprobe server|client flags")
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	addr := fs.String("addr", "", "server address")
	held := fs.String("held", "", "server: file that gets one byte per held Check")
	idle := fs.Int("idle", 0, "client: connections with one finished Check")
	holds := fs.Int("holds", 0, "client: connections with one held Check")
	streams := fs.Int("streams", 0, "client: connections with one Watch")
	fs.Parse(os.Args[2:])
	switch os.Args[1] {
	case "server":
		log.Fatal(serve(*addr, *held))
	case "client":
		if err := client(*addr, *idle, *holds, *streams); err != nil {
			log.Fatal(err)
		}
	default:
		log.Fatalf("unknown mode %q", os.Args[1])
	}
}

type health struct {
	healthpb.UnimplementedHealthServer
	held string
}

func (h *health) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if req.Service != "slow" {
		return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
	}
	if err := appendByte(h.held); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

func (h *health) Watch(req *healthpb.HealthCheckRequest, s healthpb.Health_WatchServer) error {
	for {
		if err := s.Send(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}); err != nil {
			return err
		}
		select {
		case <-s.Context().Done():
			return nil
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func serve(addr, held string) error {
	l, err := net.Listen("tcp4", addr)
	if err != nil {
		return err
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, &health{held: held})
	return srv.Serve(l)
}

func appendByte(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write([]byte{1}); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// dial opens one client connection and says its local port.
func dial(addr string) (*grpc.ClientConn, healthpb.HealthClient, chan int, error) {
	port := make(chan int, 1)
	cc, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, "tcp4", a)
			if err == nil {
				port <- c.LocalAddr().(*net.TCPAddr).Port
			}
			return c, err
		}))
	if err != nil {
		return nil, nil, nil, err
	}
	return cc, healthpb.NewHealthClient(cc), port, nil
}

func client(addr string, idle, holds, streams int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i := 0; i < idle; i++ {
		_, hc, port, err := dial(addr)
		if err != nil {
			return err
		}
		if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			return err
		}
		fmt.Println("idle", <-port)
	}
	for i := 0; i < holds; i++ {
		_, hc, port, err := dial(addr)
		if err != nil {
			return err
		}
		go hc.Check(context.Background(), &healthpb.HealthCheckRequest{Service: "slow"})
		select {
		case p := <-port:
			fmt.Println("held", p)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for i := 0; i < streams; i++ {
		_, hc, port, err := dial(addr)
		if err != nil {
			return err
		}
		w, err := hc.Watch(context.Background(), &healthpb.HealthCheckRequest{})
		if err != nil {
			return err
		}
		if _, err := w.Recv(); err != nil {
			return err
		}
		fmt.Println("stream", <-port)
	}
	fmt.Println("ready")
	bufio.NewReader(os.Stdin).ReadString('\n')
	return nil
}
