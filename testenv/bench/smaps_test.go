package bench

import (
	"strings"
	"testing"
)

// A literal smaps: the executable's three segments, an anonymous Go heap
// arena, the ring buffer mapped by the reader and the state file, summed
// per kind of mapping.
func TestSumSmaps(t *testing.T) {
	const exe = "/usr/bin/drainwatch"
	smaps := `00400000-01f87000 r-xp 00000000 fe:00 10003291                           /usr/bin/drainwatch
Size:              28188 kB
Rss:               26372 kB
Pss:               26372 kB
Anonymous:             0 kB
01f87000-03f57000 r--p 01b87000 fe:00 10003291                           /usr/bin/drainwatch
Rss:               20208 kB
Pss:               20208 kB
Anonymous:             0 kB
03f57000-04084000 rw-p 03b57000 fe:00 10003291                           /usr/bin/drainwatch
Rss:                1140 kB
Pss:                1140 kB
Anonymous:           200 kB
381414c00000-381416000000 rw-p 00000000 00:00 0 
Rss:               10388 kB
Pss:               10388 kB
Anonymous:         10388 kB
7fc1c84be000-7fc1c84c0000 r--s 00000000 00:10 1038                       anon_inode:bpf-map
Rss:                   8 kB
Pss:                   4 kB
Anonymous:             0 kB
7fc1c84c0000-7fc1c8cc1000 r--s 00001000 00:10 1038                       anon_inode:bpf-map
Rss:                8196 kB
Pss:                4098 kB
Anonymous:             0 kB
7fc1c843d000-7fc1c84bd000 r--s 00000000 fe:00 10003086                   /var/lib/drainwatch/drainwatch.db
Rss:                 292 kB
Pss:                 292 kB
Anonymous:             0 kB
7ffd1c9e9000-7ffd1ca0a000 rw-p 00000000 00:00 0                          [stack]
Rss:                  16 kB
Pss:                  16 kB
Anonymous:            16 kB
`
	got, err := sumSmaps(strings.NewReader(smaps), exe)
	if err != nil {
		t.Fatal(err)
	}
	want := []Mapping{
		{Kind: "exe text (r-x)", RSS: 26372, PSS: 26372},
		{Kind: "exe rodata, pclntab (r--)", RSS: 20208, PSS: 20208},
		{Kind: "anonymous (Go heap, stacks, bss)", RSS: 10388, Anon: 10388, PSS: 10388},
		{Kind: "BPF maps (ring buffer)", RSS: 8204, PSS: 4102},
		{Kind: "exe data (rw-)", RSS: 1140, Anon: 200, PSS: 1140},
		{Kind: "file drainwatch.db", RSS: 292, PSS: 292},
		{Kind: "[stack]", RSS: 16, Anon: 16, PSS: 16},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d kinds %+v, want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("kind %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}
