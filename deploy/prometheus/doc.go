// Package prometheus holds drainwatch's alerting rules (alerts.yaml) and
// their promtool unit tests (alerts_test.yaml); its Go test runs promtool so
// `go test ./...` checks them.
package prometheus
