package lab

import (
	"context"
	"errors"
)

// Summary is summary.json: the table's rows, and what the shipped alert
// rules and dashboard showed against the lab's data.
type Summary struct {
	Scenarios  []Result    `json:"scenarios"`
	Prometheus *PromChecks `json:"prometheus,omitempty"`
}

// PromChecks are the shipped alert's and dashboard's checks against the
// lab's Prometheus; nil when the rolling update did not run (they need
// its revisions).
type PromChecks struct {
	Alert     AlertCheck     `json:"alert"`
	Dashboard DashboardCheck `json:"dashboard"`
}

// checkAlertsAndDashboard runs both checks once the scenarios are done,
// when the rolling update reported its revisions.
func (l *Lab) checkAlertsAndDashboard(ctx context.Context, results []Result) *PromChecks {
	rows := rolloutRows(results)
	if len(rows) == 0 {
		l.progress.Step("alert and dashboard checks skipped: they need the rolling update's revisions")
		return nil
	}
	c := &PromChecks{Alert: l.checkRefusedAlert(ctx, rows), Dashboard: l.checkDashboard(ctx, rows)}
	l.progress.Step("%s", c.Alert.Result)
	l.progress.Step("%s", c.Dashboard.Result)
	return c
}

// rolloutRows are the rolling update's rows that measured a revision.
func rolloutRows(results []Result) []Result {
	var rows []Result
	for _, r := range results {
		if r.Namespace == rolloutNS && r.Revision != "" && r.Error == "" {
			rows = append(rows, r)
		}
	}
	return rows
}

// err is the checks' failure (nil when they passed or did not run).
func (c *PromChecks) err() error {
	if c == nil {
		return nil
	}
	var errs []error
	if c.Alert.Error != "" {
		errs = append(errs, errors.New(c.Alert.Result))
	}
	if c.Dashboard.Failed {
		errs = append(errs, errors.New(c.Dashboard.Result))
	}
	return errors.Join(errs...)
}
