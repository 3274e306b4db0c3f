// Package prometheus holds drainwatch's alerting rules (alerts.yaml) and
// their promtool unit tests (alerts_test.yaml); its Go test runs promtool so
// `go test ./...` checks them. gen wraps the same groups in the
// prometheus-operator overlay's PrometheusRule.
package prometheus

//go:generate go run ./gen
//go:generate cp alerts.yaml ../helm/drainwatch/files/alerts.yaml
