package main

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/cilium/ebpf/btf"
)

// kernelLikeBTF is a small BTF blob with the struct the extractor looks for.
func kernelLikeBTF(t *testing.T, name string) []byte {
	t.Helper()
	u64 := &btf.Int{Name: "u64", Size: 8}
	st := &btf.Struct{Name: name, Size: 8, Members: []btf.Member{{Name: "syscallno", Type: u64}}}
	b, err := btf.NewBuilder([]btf.Type{st}, nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := b.Marshal(nil, &btf.MarshalOptions{Order: binary.LittleEndian})
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// An image holding a stray magic, a BTF blob of other types and the
// kernel's: exactly the kernel's bytes come out.
func TestExtractsTheKernelsBTF(t *testing.T) {
	want := kernelLikeBTF(t, "pt_regs")
	var img bytes.Buffer
	img.Write(bytes.Repeat([]byte{0xaa}, 4096))
	img.Write([]byte{0x9f, 0xeb, 0x01, 0x00, 0xff, 0xff, 0xff, 0xff})
	img.Write(kernelLikeBTF(t, "module_thing"))
	img.Write(bytes.Repeat([]byte{0x55}, 100))
	img.Write(want)
	img.Write(bytes.Repeat([]byte{0}, 4096))
	dir := t.TempDir()
	in, out := filepath.Join(dir, "Image"), filepath.Join(dir, "btf")
	if err := os.WriteFile(in, img.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(in, out); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("extracted %d bytes, want the kernel's %d", len(got), len(want))
	}
}

func TestTwoKernelBlobsAreAnError(t *testing.T) {
	blob := kernelLikeBTF(t, "pt_regs")
	dir := t.TempDir()
	in := filepath.Join(dir, "Image")
	if err := os.WriteFile(in, append(append([]byte{}, blob...), blob...), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(in, filepath.Join(dir, "btf")); err == nil {
		t.Fatal("two kernel BTF blobs: want an error")
	}
}
