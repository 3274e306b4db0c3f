// Command btfextract copies a kernel's BTF out of its boot image, for a
// vmlinux.h of an architecture this machine does not run (make
// vmlinux-arm64). Debian's arm64 vmlinuz is the raw Image with no symbols
// beside it (its System.map is a placeholder), so the .BTF section is found
// by its header: magic 0xeB9F, version 1, a 24-byte header, types then
// strings. Exactly one such blob must parse as BTF.
//
//	btfextract IMAGE OUT
package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"

	"github.com/cilium/ebpf/btf"
)

// btfHeader is struct btf_header (include/uapi/linux/btf.h).
type btfHeader struct {
	Magic   uint16
	Version uint8
	Flags   uint8
	HdrLen  uint32
	TypeOff uint32
	TypeLen uint32
	StrOff  uint32
	StrLen  uint32
}

const btfHeaderLen = 24

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: btfextract IMAGE OUT")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "btfextract:", err)
		os.Exit(1)
	}
}

func run(image, out string) error {
	img, err := os.ReadFile(image)
	if err != nil {
		return err
	}
	blobs := candidates(img)
	var found [][]byte
	for _, b := range blobs {
		spec, err := btf.LoadSpecFromReader(bytes.NewReader(b))
		if err != nil {
			continue
		}
		if _, err := spec.AnyTypeByName("pt_regs"); err != nil {
			continue // BTF, but not the kernel's own
		}
		found = append(found, b)
	}
	if len(found) != 1 {
		return fmt.Errorf("%s: %d kernel BTF blobs (of %d headers), want exactly 1", image, len(found), len(blobs))
	}
	if err := os.WriteFile(out, found[0], 0o644); err != nil {
		return fmt.Errorf("write BTF: %w", err)
	}
	fmt.Fprintf(os.Stderr, "btfextract: %d bytes of BTF from %s\n", len(found[0]), image)
	return nil
}

// candidates returns every span of img that starts with a well-formed
// little-endian BTF header whose types and strings fit in img.
func candidates(img []byte) [][]byte {
	magic := []byte{0x9f, 0xeb, 0x01, 0x00}
	var out [][]byte
	for off := 0; ; off++ {
		i := bytes.Index(img[off:], magic)
		if i < 0 {
			return out
		}
		off += i
		if len(img)-off < btfHeaderLen {
			return out
		}
		var h btfHeader
		_ = binary.Read(bytes.NewReader(img[off:off+btfHeaderLen]), binary.LittleEndian, &h)
		end := uint64(off) + btfHeaderLen + uint64(h.StrOff) + uint64(h.StrLen)
		if h.HdrLen != btfHeaderLen || h.TypeOff != 0 || h.StrOff != h.TypeLen || end > uint64(len(img)) {
			continue
		}
		out = append(out, img[off:end])
	}
}
