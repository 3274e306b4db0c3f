// Package grafana defines drainwatch's Grafana dashboard in Go with the
// Grafana Foundation SDK; gen writes it to drainwatch.json, which is
// committed so users import it without building anything.
package grafana

//go:generate go run ./gen -o drainwatch.json
//go:generate cp drainwatch.json ../helm/drainwatch/files/drainwatch.json
