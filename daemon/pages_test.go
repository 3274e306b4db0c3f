package daemon

import (
	"strings"
	"testing"
)

// Only the executable's mappings that are neither writable nor copied on
// write are released.
func TestReadOnlyMappingsOfTheExecutable(t *testing.T) {
	smaps := `00400000-0227e000 r-xp 00000000 fe:00 99 /usr/bin/drainwatch
Size:              31224 kB
Rss:               22072 kB
Anonymous:             0 kB
0227e000-0485c000 r--p 01e7e000 fe:00 99 /usr/bin/drainwatch
Rss:               22584 kB
Anonymous:             0 kB
0485c000-0498f000 rw-p 0445c000 fe:00 99 /usr/bin/drainwatch
Rss:                1164 kB
Anonymous:           900 kB
04a00000-04b00000 r--p 00000000 fe:00 99 /usr/bin/drainwatch
Rss:                  12 kB
Anonymous:             4 kB
7f0000000000-7f0000001000 r--p 00000000 fe:00 12 /usr/lib/x86_64-linux-gnu/libc.so.6
Rss:                   4 kB
Anonymous:             0 kB
7f0000002000-7f0000003000 rw-p 00000000 00:00 0
Rss:                   4 kB
Anonymous:             4 kB
`
	got := readOnlyMappings(strings.NewReader(smaps), "/usr/bin/drainwatch")
	want := []mapping{{0x400000, 0x227e000, 22072}, {0x227e000, 0x485c000, 22584}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("readOnlyMappings = %+v, want %+v", got, want)
	}
}
