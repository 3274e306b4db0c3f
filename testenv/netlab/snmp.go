package netlab

import (
	"fmt"
	"strconv"
	"strings"
)

// TCPCounter reads the Tcp counter name (PassiveOpens, OutRsts, ...) from
// the text of a network namespace's /proc/net/snmp: a line of names, then
// a line of values.
func TCPCounter(snmp []byte, name string) (uint64, error) {
	var names []string
	for _, line := range strings.Split(string(snmp), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || fields[0] != "Tcp:" {
			continue
		}
		if names == nil {
			names = fields
			continue
		}
		for i, n := range names {
			if n == name && i < len(fields) {
				return strconv.ParseUint(fields[i], 10, 64)
			}
		}
		break
	}
	return 0, fmt.Errorf("no Tcp %s in /proc/net/snmp", name)
}
