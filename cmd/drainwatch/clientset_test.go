package main

import (
	"debug/elf"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoClientsetLinked builds drainwatch as `make image` does and checks
// that client-go's all-groups Clientset is not in it: k8s.io/apiserver
// makes the linker keep every method of a type used as an interface, so
// one kubernetes.NewForConfig anywhere in the product costs ~8 MiB of
// executable that every daemon maps (use collector/kube.Clients).
func TestNoClientsetLinked(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "drainwatch")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, ".")
	build.Env = append(build.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range syms {
		if strings.HasPrefix(s.Name, "k8s.io/client-go/kubernetes.") {
			t.Errorf("%s is linked: the product builds a client-go Clientset (use kube.NewClients)", s.Name)
		}
	}
}
