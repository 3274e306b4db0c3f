package lab

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/drainwatch/drainwatch/exporter"
	"github.com/drainwatch/drainwatch/exporter/otlp"
	"github.com/drainwatch/drainwatch/testenv/otelcol"
)

// otlpWait bounds how long the collector may take to hold every complete
// termination after the scenarios (a daemon checkpoints, then sends, within
// seconds).
const otlpWait = time.Minute

// startCollector runs the real OpenTelemetry Collector the daemons send
// their records to (--otlp-endpoint): issue 26's proof that the collector's
// file holds exactly the lab's terminations.
func (l *Lab) startCollector(ctx context.Context) error {
	c, err := otelcol.Start(ctx, filepath.Join(l.cfg.Out, "otelcol"))
	if err != nil {
		return fmt.Errorf("starting the OpenTelemetry Collector: %w", err)
	}
	l.otelcol = c
	l.progress.Step("otelcol (OTLP receiver, file exporter): gRPC %s, records in %s", c.GRPCAddr(), c.LogsPath())
	return nil
}

// OTLPCheck compares the collector's termination records with the
// daemons' API: the same terminations, each once, with the same totals.
type OTLPCheck struct {
	Result string `json:"result"`
	Failed bool   `json:"failed"`
}

func (c OTLPCheck) err() error {
	if c.Failed {
		return errors.New(c.Result)
	}
	return nil
}

// otlpTotals are the counts the check sums on both sides.
type otlpTotals struct {
	terminations, refused, killed, killedAtExit, blackholed, resets int64
}

func (t otlpTotals) String() string {
	return fmt.Sprintf("%d terminations, refused %d, killed by SIGKILL %d, killed at exit %d, blackholed %d, reset at shutdown %d",
		t.terminations, t.refused, t.killed, t.killedAtExit, t.blackholed, t.resets)
}

// checkOTLP waits until the collector holds a record of every complete
// termination the daemons list, then compares both sides' totals.
func (l *Lab) checkOTLP(ctx context.Context) OTLPCheck {
	if l.otelcol == nil {
		return OTLPCheck{Result: "otlp: no collector ran", Failed: true}
	}
	ctx, cancel := context.WithTimeout(ctx, otlpWait)
	defer cancel()
	var api, col otlpTotals
	var why string
	for {
		vs, err := l.Terminations(ctx, "")
		logs, lerr := l.otelcol.Logs()
		if err == nil && lerr == nil {
			api, col, why = compareOTLP(vs, logs)
			if why == "" {
				return OTLPCheck{Result: "otlp: the collector holds exactly the daemons' terminations: " + col.String()}
			}
		} else {
			why = errors.Join(err, lerr).Error()
		}
		select {
		case <-ctx.Done():
			return OTLPCheck{Failed: true, Result: fmt.Sprintf("otlp: FAIL after %s: %s (daemons' API: %s; collector: %s)", otlpWait, why, api, col)}
		case <-time.After(time.Second):
		}
	}
}

// compareOTLP sums the complete pod terminations of the API and the
// collector's termination records, and says what differs ("" when
// nothing): the pods (by the resource's k8s.pod.uid), each record once (by
// drainwatch.record.id), and the totals.
func compareOTLP(vs []exporter.TerminationView, logs []otelcol.Log) (api, col otlpTotals, why string) {
	want := map[string]bool{}
	for _, v := range vs {
		if !v.Complete || v.Container != "" {
			continue // a container's termination (its pod goes on) is not a pod's
		}
		want[v.PodUID] = true
		api.terminations++
		api.refused += int64(v.Counts.RefusedAfterSigterm + v.Counts.RefusedBeforeSigterm)
		api.killed += int64(v.Counts.RequestsKilledBySigkill)
		api.killedAtExit += int64(v.Counts.RequestsKilledAtExit)
		api.blackholed += int64(v.Counts.ConnectionsBlackholed)
		api.resets += int64(v.Counts.ConnectionsResetAtShutdown)
	}
	ids := map[string]int{}
	pods := map[string]bool{}
	for _, l := range logs {
		if l.EventName != otlp.EventTermination {
			continue
		}
		if _, container := l.Resource["k8s.container.name"]; container {
			continue
		}
		id, _ := l.Attributes[otlp.AttrRecordID].(string)
		uid, _ := l.Resource["k8s.pod.uid"].(string)
		ids[id]++
		pods[uid] = true
		col.terminations++
		col.refused += attrInt(l, "refused_after_sigterm") + attrInt(l, "refused_before_sigterm")
		col.killed += attrInt(l, "requests_killed_by_sigkill")
		col.killedAtExit += attrInt(l, "requests_killed_at_exit")
		col.blackholed += attrInt(l, "connections_blackholed")
		col.resets += attrInt(l, "connections_reset_at_shutdown")
	}
	for id, n := range ids {
		if n != 1 {
			return api, col, fmt.Sprintf("the collector holds %s %d times", id, n)
		}
	}
	for uid := range want {
		if !pods[uid] {
			return api, col, fmt.Sprintf("no record of pod %s's termination", uid)
		}
	}
	for uid := range pods {
		if !want[uid] {
			return api, col, fmt.Sprintf("a record of pod %s, which the daemons do not list as terminated", uid)
		}
	}
	if api != col {
		return api, col, "the totals differ"
	}
	return api, col, ""
}

func attrInt(l otelcol.Log, count string) int64 {
	n, _ := l.Attributes["drainwatch.counts."+count].(int64)
	return n
}
