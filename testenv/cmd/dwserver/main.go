// Command dwserver is testenv's workload server (image name "dwserver"):
// see package testenv/workload for the modes and routes.
//
//	dwserver --mode=naive|protocol|ignore-term|h2c|grpc|no-handler|shutdown-short [--port=8080] [--addr=127.0.0.1:8080]
//	         [--drain-delay=1.5s] [--shutdown-timeout=25s] [--work=20ms] [--log-requests]
//	         [--ignore-stop] [--end-streams] [--idle-timeout=0]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/drainwatch/drainwatch/testenv/workload"
	"github.com/rs/zerolog"
)

func main() {
	var cfg workload.Config
	port := flag.Int("port", 8080, "TCP port to listen on (all addresses)")
	addr := flag.String("addr", "", "address to listen on; overrides --port (tests use a loopback address)")
	flag.StringVar(&cfg.Mode, "mode", workload.ModeNaive, "naive, protocol, ignore-term, h2c, grpc, no-handler or shutdown-short")
	flag.DurationVar(&cfg.DrainDelay, "drain-delay", 1500*time.Millisecond, "protocol, h2c, grpc: keep serving this long after SIGTERM")
	flag.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", 25*time.Second, "bound on finishing in-flight requests")
	flag.DurationVar(&cfg.WorkDuration, "work", 20*time.Millisecond, "duration of /work")
	flag.BoolVar(&cfg.LogRequests, "log-requests", false, "log every request (debug)")
	flag.BoolVar(&cfg.IgnoreStop, "ignore-stop", false, "ignore SIGTERM, SIGINT, SIGQUIT, SIGUSR1 and SIGHUP: only SIGKILL ends the server")
	flag.BoolVar(&cfg.EndStreams, "end-streams", false, "grpc: end open Watch streams (status OK) at the stop signal")
	flag.DurationVar(&cfg.IdleTimeout, "idle-timeout", 0, "close kept-alive connections idle this long (0: never)")
	flag.DurationVar(&cfg.UnhealthyAfter, "unhealthy-after", 0, "answer /healthz with 500 this long after starting (0: never): a liveness probe restarts the server")
	healthPort := flag.Int("health-port", 0, "a port that listens at once and accepts (and closes) connections, for a tcpSocket readiness probe (0: none)")
	flag.DurationVar(&cfg.ListenAfter, "listen-after", 0, "listen on the traffic port this long after starting")
	flag.DurationVar(&cfg.ResetFor, "reset-for", 0, "for this long after the traffic port opens, reset the connection of every request instead of answering (a warm-up)")
	flag.Parse()
	if *healthPort != 0 {
		cfg.HealthAddr = ":" + strconv.Itoa(*healthPort)
	}
	cfg.Addr = ":" + strconv.Itoa(*port)
	if *addr != "" {
		cfg.Addr = *addr
	}

	zerolog.TimeFieldFormat = time.RFC3339Nano
	log := zerolog.New(os.Stderr).With().Timestamp().Int("pid", os.Getpid()).Logger()
	if err := run(cfg, log); err != nil {
		log.Error().Err(err).Str("event", "exit").Msg("exiting with error")
		os.Exit(1)
	}
	log.Info().Str("event", "exit").Msg("exiting")
}

func run(cfg workload.Config, log zerolog.Logger) error {
	switch cfg.Mode {
	case workload.ModeIgnoreTerm:
		log.Info().Str("event", "exec_shell").Msg("re-exec under /bin/sh as PID 1, SIGTERM will be ignored")
		return workload.ExecUnderShell([]string{
			"--mode=" + workload.ModeNaive, "--addr=" + cfg.Addr,
			"--shutdown-timeout=" + cfg.ShutdownTimeout.String(), "--work=" + cfg.WorkDuration.String(),
			"--log-requests=" + strconv.FormatBool(cfg.LogRequests),
		})
	case workload.ModeNaive, workload.ModeProtocol, workload.ModeH2C, workload.ModeGRPC, workload.ModeNoHandler, workload.ModeShutdownShort:
	default:
		return fmt.Errorf("unknown --mode %q: want naive, protocol, ignore-term, h2c, grpc, no-handler or shutdown-short", cfg.Mode)
	}
	stop := make(chan os.Signal, 1)
	switch {
	case cfg.Mode == workload.ModeNoHandler:
		// No signal.Notify: the runtime's default action ends the process.
		log.Info().Str("event", "no_handler").Msg("no signal handler: the stop signal ends the server")
	case cfg.IgnoreStop:
		// Whatever stop signal the runtime sends, the process lives on
		// until SIGKILL cuts what it is serving.
		signal.Ignore(syscall.SIGTERM, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGHUP)
		log.Info().Str("event", "ignore_stop").Msg("stop signals ignored, only SIGKILL ends the server")
	default:
		signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	}
	log.Info().Str("event", "start").Str("mode", cfg.Mode).Dur("drain_delay", cfg.DrainDelay).Msg("starting")
	return workload.New(cfg, log).Run(context.Background(), stop)
}
