package soak

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"

	"github.com/drainwatch/drainwatch/exporter"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/router"
)

// evidence writes what a termination that was not exact is to be judged
// by: drainwatch's view of it, the router's records for the pod and the
// node agent's termination record. It returns the file's path.
func (s *soak) evidence(round int, p *corev1.Pod, v exporter.TerminationView, conns []router.Conn) string {
	addr := cluster.PodAddr(p, cluster.ServerPort)
	var mine []router.Conn
	for _, c := range conns {
		if c.Backend == addr {
			mine = append(mine, c)
		}
	}
	body, err := json.MarshalIndent(map[string]any{"drainwatch": v, "router": mine,
		"node_agent": s.cluster.Terminations(p.UID)}, "", "  ")
	if err != nil {
		return err.Error()
	}
	path := filepath.Join(s.cfg.Out, fmt.Sprintf("inexact-round%d-%s.json", round, p.Name))
	if err := os.WriteFile(path, body, 0o644); err != nil {
		return err.Error()
	}
	return path
}
