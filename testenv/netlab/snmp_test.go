package netlab

import "testing"

func TestTCPCounter(t *testing.T) {
	snmp := []byte("Ip: Forwarding DefaultTTL\nIp: 1 64\n" +
		"Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors\n" +
		"Tcp: 1 200 120000 -1 5 7 0 0 0 40 41 0 0 116450 0\n")
	for name, want := range map[string]uint64{"PassiveOpens": 7, "OutRsts": 116450} {
		if got, err := TCPCounter(snmp, name); err != nil || got != want {
			t.Errorf("%s = %d, %v; want %d", name, got, err, want)
		}
	}
	if _, err := TCPCounter(snmp, "Nope"); err == nil {
		t.Error("a counter that is not there: no error")
	}
}
