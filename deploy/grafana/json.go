package grafana

import (
	"encoding/json"
	"fmt"
)

// JSON is the dashboard as committed in drainwatch.json.
func JSON() ([]byte, error) {
	d, err := Dashboard()
	if err != nil {
		return nil, err
	}
	data, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding the dashboard: %w", err)
	}
	return append(data, '\n'), nil
}
