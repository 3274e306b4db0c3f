// Command dwserver is testenv's workload server (image name "dwserver"):
// see package testenv/workload for the modes and routes.
//
//	dwserver --mode=naive|protocol|ignore-term [--port=8080] [--drain-delay=1.5s]
//	         [--shutdown-timeout=25s] [--work=20ms] [--log-requests]
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
	flag.StringVar(&cfg.Mode, "mode", workload.ModeNaive, "naive, protocol or ignore-term")
	flag.DurationVar(&cfg.DrainDelay, "drain-delay", 1500*time.Millisecond, "protocol: keep serving this long after SIGTERM")
	flag.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", 25*time.Second, "bound on finishing in-flight requests")
	flag.DurationVar(&cfg.WorkDuration, "work", 20*time.Millisecond, "duration of /work")
	flag.BoolVar(&cfg.LogRequests, "log-requests", false, "log every request (debug)")
	flag.Parse()
	cfg.Addr = ":" + strconv.Itoa(*port)

	zerolog.TimeFieldFormat = time.RFC3339Nano
	log := zerolog.New(os.Stderr).With().Timestamp().Int("pid", os.Getpid()).Logger()
	if err := run(cfg, *port, log); err != nil {
		log.Error().Err(err).Str("event", "exit").Msg("exiting with error")
		os.Exit(1)
	}
	log.Info().Str("event", "exit").Msg("exiting")
}

func run(cfg workload.Config, port int, log zerolog.Logger) error {
	switch cfg.Mode {
	case workload.ModeIgnoreTerm:
		log.Info().Str("event", "exec_shell").Msg("re-exec under /bin/sh as PID 1, SIGTERM will be ignored")
		return workload.ExecUnderShell([]string{
			"--mode=" + workload.ModeNaive, "--port=" + strconv.Itoa(port),
			"--shutdown-timeout=" + cfg.ShutdownTimeout.String(), "--work=" + cfg.WorkDuration.String(),
			"--log-requests=" + strconv.FormatBool(cfg.LogRequests),
		})
	case workload.ModeNaive, workload.ModeProtocol:
	default:
		return fmt.Errorf("unknown --mode %q: want naive, protocol or ignore-term", cfg.Mode)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	log.Info().Str("event", "start").Str("mode", cfg.Mode).Dur("drain_delay", cfg.DrainDelay).Msg("starting")
	return workload.New(cfg, log).Run(context.Background(), stop)
}
