package node

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

func TestNetnsOfSelf(t *testing.T) {
	ino, err := NetnsOfPID(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	link, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("net:[%d]", ino); link != want {
		t.Fatalf("readlink = %q, want %q", link, want)
	}
	for _, arg := range []string{"/proc/self/ns/net", fmt.Sprint(ino)} {
		got, err := ResolveNetns(arg)
		if err != nil || got != ino {
			t.Errorf("ResolveNetns(%q) = %d, %v; want %d", arg, got, err, ino)
		}
	}
	if _, err := ResolveNetns("/nonexistent/ns"); err == nil || !strings.Contains(err.Error(), "/nonexistent/ns") {
		t.Errorf("missing path: err = %v", err)
	}
}
