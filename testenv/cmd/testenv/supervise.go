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
	"github.com/drainwatch/drainwatch/testenv/realnode"
)

// supervise runs the cluster until SIGTERM or SIGINT, reporting on fd 3.
func supervise(dir string, nodes, realNodes int, prefix string) error {
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
	reals, err := startRealNodes(ctx, c, realNodes, prefix, log)
	if err != nil {
		fmt.Fprintf(report, "error: %v\n", err)
		_ = c.Stop()
		return err
	}
	defer func() { closeRealNodes(reals, log) }() // on every error path below
	names := append([]string(nil), c.NodeNames...)
	for _, n := range reals {
		names = append(names, n.Name)
	}
	s := state{PID: os.Getpid(), Kubeconfig: c.Kubeconfig, URL: c.CP.URL, Nodes: names,
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
	closeRealNodes(reals, log)
	reals = nil
	return c.Stop()
}

// startRealNodes starts n real nodes (testenv/realnode) on the cluster's
// fabric, named <prefix>real-<i>, indexed after the stand-ins.
func startRealNodes(ctx context.Context, c *cluster.Cluster, n int, prefix string, log zerolog.Logger) ([]*realnode.Node, error) {
	var nodes []*realnode.Node
	for i := 1; i <= n; i++ {
		rn, err := realnode.Start(ctx, realnode.Config{Name: fmt.Sprintf("%sreal-%d", prefix, i),
			Index: len(c.NodeNames) + i, Fabric: c.Fabric, Kubeconfig: c.Kubeconfig, Log: log})
		if err != nil {
			closeRealNodes(nodes, log)
			return nil, err
		}
		nodes = append(nodes, rn)
	}
	return nodes, nil
}

func closeRealNodes(nodes []*realnode.Node, log zerolog.Logger) {
	for _, n := range nodes {
		if err := n.Close(); err != nil {
			log.Error().Err(err).Str("node", n.Name).Msg("closing real node")
		}
	}
}
