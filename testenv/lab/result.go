package lab

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
)

// Result is one row of the final table and one element of summary.json:
// what the clients saw next to what drainwatch reported.
type Result struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	// Revision is the replaced revision a rolling update's row counts.
	Revision          string `json:"revision,omitempty"`
	ClientRefused     int    `json:"client_refused"`
	DrainwatchRefused int    `json:"drainwatch_refused"`
	ClientKilled      int    `json:"client_killed"`
	DrainwatchKilled  int    `json:"drainwatch_killed"`
	// ClientKilledAtExit: requests the clients saw cut by the exit of a
	// server that does not drain (groundtruth.go); drainwatch's is
	// requests_killed_at_exit.
	ClientKilledAtExit     int `json:"client_killed_at_exit"`
	DrainwatchKilledAtExit int `json:"drainwatch_killed_at_exit"`
	// ProberProbeRefused is the kubelet prober's own count of its probes
	// refused since the deletion; drainwatch's is probe_refused.
	ProberProbeRefused     int `json:"prober_probe_refused"`
	DrainwatchProbeRefused int `json:"drainwatch_probe_refused"`
	// ClientResetAtShutdown: connections the clients (or the router) saw
	// reset or closed unanswered by the live server (groundtruth.go);
	// drainwatch's is connections_reset_at_shutdown.
	ClientResetAtShutdown     int `json:"client_reset_at_shutdown"`
	DrainwatchResetAtShutdown int `json:"drainwatch_reset_at_shutdown"`
	// ProxyResetOnReuse: the upstream aborts an L7 proxy logged (the
	// keep-alive race); drainwatch's is requests_reset_on_reused_connections,
	// in terminations and outside them. Zero for scenarios without a proxy.
	ProxyResetOnReuse      int `json:"proxy_reset_on_reuse"`
	DrainwatchResetOnReuse int `json:"drainwatch_reset_on_reuse"`
	// The startup side (startup_row.go): the clients' refusals sent
	// before and after the daemon's Ready mark; drainwatch's are
	// refused_before_ready and refused_after_ready.
	ClientRefusedBeforeReady     int `json:"client_refused_before_ready,omitempty"`
	DrainwatchRefusedBeforeReady int `json:"drainwatch_refused_before_ready,omitempty"`
	ClientRefusedAfterReady      int `json:"client_refused_after_ready,omitempty"`
	DrainwatchRefusedAfterReady  int `json:"drainwatch_refused_after_ready,omitempty"`
	// ClientResetAfterReady: the clients' connections the new pod reset
	// instead of answering, sent after the Ready mark; drainwatch's is
	// reset_after_ready.
	ClientResetAfterReady     int `json:"client_reset_after_ready,omitempty"`
	DrainwatchResetAfterReady int `json:"drainwatch_reset_after_ready,omitempty"`
	// ClientBlackholed: the clients' connects to a replaced pod (or the
	// router's dials) that failed without a refusal or a reset (a timeout,
	// no route to host: its network was gone; BlackholedTo,
	// BlackholedByBackend); drainwatch's is connections_blackholed.
	ClientBlackholed     int `json:"client_blackholed"`
	DrainwatchBlackholed int `json:"drainwatch_blackholed"`
	// ProxyRefusedInside: the forwards a sidecar proxy logged refused by
	// the container behind it over the pod's loopback (mesh.go);
	// drainwatch's is refused_inside_pod. Zero without a sidecar.
	ProxyRefusedInside      int      `json:"proxy_refused_inside,omitempty"`
	DrainwatchRefusedInside int      `json:"drainwatch_refused_inside,omitempty"`
	Diagnoses               []string `json:"diagnoses"`
	// Source says where drainwatch's numbers come from: "api" (the
	// daemons' terminations) or "prometheus" (PromQL by revision).
	Source string `json:"source"`
	// Note is what else the scenario measured (client outcomes, exit code).
	Note string `json:"note,omitempty"`
	// Error is set when the scenario could not be measured.
	Error string `json:"error,omitempty"`
	// NotStarted says why the scenario's pods never became Ready, when
	// that is why it failed (their conditions, states, logs, Events).
	NotStarted string `json:"not_started,omitempty"`
}

// Agree reports whether the scenario ran and every pair is equal.
func (r Result) Agree() bool {
	return r.Error == "" && r.ClientRefused == r.DrainwatchRefused && r.ClientKilled == r.DrainwatchKilled &&
		r.ClientKilledAtExit == r.DrainwatchKilledAtExit &&
		r.ProberProbeRefused == r.DrainwatchProbeRefused && r.ClientResetAtShutdown == r.DrainwatchResetAtShutdown &&
		r.ProxyResetOnReuse == r.DrainwatchResetOnReuse &&
		r.ClientRefusedBeforeReady == r.DrainwatchRefusedBeforeReady && r.ClientRefusedAfterReady == r.DrainwatchRefusedAfterReady &&
		r.ClientResetAfterReady == r.DrainwatchResetAfterReady &&
		r.ClientBlackholed == r.DrainwatchBlackholed && r.ProxyRefusedInside == r.DrainwatchRefusedInside
}

// AllAgree reports whether every result agrees (and there is at least one).
func AllAgree(rs []Result) bool {
	for _, r := range rs {
		if !r.Agree() {
			return false
		}
	}
	return len(rs) > 0
}

// Table renders the final table.
func Table(rs []Result) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\trefused clients/drainwatch\tkilled clients/drainwatch\tkilled at exit clients/drainwatch\tprobe refused prober/drainwatch\t"+
		"reset at shutdown clients/drainwatch\treset on reuse proxy/drainwatch\trefused before/after Ready clients/drainwatch\treset after Ready clients/drainwatch\tblackholed clients/drainwatch\trefused inside the pod proxy/drainwatch\tagree\tdiagnosis")
	for _, r := range rs {
		agree := "yes"
		if !r.Agree() {
			agree = "NO"
		}
		diag := strings.Join(r.Diagnoses, ", ")
		if r.Error != "" {
			diag = "error: " + r.Error
		}
		fmt.Fprintf(tw, "%s\t%d / %d\t%d / %d\t%d / %d\t%d / %d\t%d / %d\t%d / %d\t%d, %d / %d, %d\t%d / %d\t%d / %d\t%d / %d\t%s\t%s\n", r.Name, r.ClientRefused, r.DrainwatchRefused,
			r.ClientKilled, r.DrainwatchKilled, r.ClientKilledAtExit, r.DrainwatchKilledAtExit, r.ProberProbeRefused, r.DrainwatchProbeRefused,
			r.ClientResetAtShutdown, r.DrainwatchResetAtShutdown, r.ProxyResetOnReuse, r.DrainwatchResetOnReuse,
			r.ClientRefusedBeforeReady, r.ClientRefusedAfterReady, r.DrainwatchRefusedBeforeReady, r.DrainwatchRefusedAfterReady,
			r.ClientResetAfterReady, r.DrainwatchResetAfterReady,
			r.ClientBlackholed, r.DrainwatchBlackholed, r.ProxyRefusedInside, r.DrainwatchRefusedInside, agree, diag)
	}
	_ = tw.Flush()
	return b.String()
}

// writeJSON writes v indented to dir/name, creating dir.
func writeJSON(dir, name string, v any) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	body, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding %s: %w", name, err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, append(body, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
