package kernel

import (
	"strings"
	"testing"
)

func TestCapsSuffice(t *testing.T) {
	for name, tc := range map[string]struct {
		eff uint64
		ok  bool
	}{
		"root":            {eff: 0x1ffffffffff, ok: true},
		"sys_admin":       {eff: 1 << capSysAdmin, ok: true},
		"bpf and perfmon": {eff: 1<<capBPF | 1<<capPerfmon, ok: true},
		"bpf only":        {eff: 1 << capBPF},
		"none":            {eff: 0},
	} {
		err := capsSuffice(tc.eff)
		if (err == nil) != tc.ok {
			t.Errorf("%s: err = %v, want ok=%v", name, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "CAP_BPF and CAP_PERFMON") {
			t.Errorf("%s: message does not say what is needed: %v", name, err)
		}
	}
}
