package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/drainwatch/drainwatch/testenv/cluster"
)

// supervise runs the cluster until SIGTERM or SIGINT, reporting on fd 3.
func supervise(dir string, nodes int, prefix string) error {
	report := os.NewFile(3, "report")
	log := zerolog.New(os.Stderr).With().Timestamp().Logger()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := os.WriteFile(pidPath(dir), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		fmt.Fprintf(report, "error: writing pid file: %v\n", err)
		return err
	}
	defer os.Remove(pidPath(dir))
	c, err := cluster.Start(ctx, cluster.Options{Nodes: nodes, Dir: filepath.Join(dir, "cluster"),
		NodePrefix: prefix, Log: log})
	if err != nil {
		fmt.Fprintf(report, "error: %v\n", err)
		return err
	}
	s := state{PID: os.Getpid(), Kubeconfig: c.Kubeconfig, URL: c.CP.URL, Nodes: c.NodeNames,
		Fabric: c.Fabric.Name(), Log: filepath.Join(dir, "supervisor.log")}
	if err := writeState(dir, s); err != nil {
		fmt.Fprintf(report, "error: %v\n", err)
		_ = c.Stop()
		return err
	}
	fmt.Fprintf(report, "KUBECONFIG=%s\n", c.Kubeconfig)
	report.Close()
	<-ctx.Done()
	log.Info().Msg("stopping cluster")
	os.Remove(statePath(dir))
	return c.Stop()
}
