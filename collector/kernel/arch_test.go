package kernel

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
)

// The objects of the other architecture cannot run on this machine; these
// tests hold them to what they can: each parses, and has the programs
// (name, section, type), maps and variables of the one this GOARCH loads,
// which the kernel tests run. A missing or renamed program in one of them
// would otherwise show only on a node of that architecture.

// bpfObjects are the committed objects, per architecture, with the loader
// of the one linked into this build.
var bpfObjects = []struct {
	stem string
	load func() (*ebpf.CollectionSpec, error)
}{
	{"sockstate", loadSockState},
	{"inflight", loadInflight},
	{"refused", loadRefused},
	{"signal", loadSignal},
	{"exit", loadExit},
}

var bpfArches = []string{"x86", "arm64"}

func TestObjectsOfEveryArchMatch(t *testing.T) {
	for _, o := range bpfObjects {
		native, err := o.load()
		if err != nil {
			t.Fatalf("%s: %v", o.stem, err)
		}
		for _, arch := range bpfArches {
			file := fmt.Sprintf("%s_%s_bpfel.o", o.stem, arch)
			spec, err := ebpf.LoadCollectionSpec(file)
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if got, want := specShape(spec), specShape(native); !slices.Equal(got, want) {
				t.Errorf("%s:\n got %q\nwant %q", file, got, want)
			}
		}
	}
}

// specShape lists what the Go side relies on in an object: programs with
// their section and type, maps with their type and sizes, variables.
func specShape(s *ebpf.CollectionSpec) []string {
	var out []string
	for name, p := range s.Programs {
		out = append(out, fmt.Sprintf("prog %s %s %s %s", name, p.SectionName, p.Type, p.AttachTo))
	}
	for name, m := range s.Maps {
		out = append(out, fmt.Sprintf("map %s %s %d/%d/%d", name, m.Type, m.KeySize, m.ValueSize, m.MaxEntries))
	}
	for name := range s.Variables {
		out = append(out, "var "+name)
	}
	slices.Sort(out)
	return out
}

// The HTTP/2 parser (bpf/h2.h, in the inflight object) finds a system call's number and arguments
// in the task's user registers, which differ per architecture: the objects
// must read exactly these fields through CO-RE, and nothing of the other
// architecture's registers.
func TestObjectsReadTheirArchsSyscallRegisters(t *testing.T) {
	want := map[string][]string{
		"x86":   {"pt_regs.dx", "pt_regs.orig_ax", "pt_regs.si"},
		"arm64": {"pt_regs.syscallno", "user_pt_regs.regs"},
	}
	for _, stem := range []string{"inflight"} {
		for _, arch := range bpfArches {
			file := fmt.Sprintf("%s_%s_bpfel.o", stem, arch)
			spec, err := ebpf.LoadCollectionSpec(file)
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			got, err := registerFields(spec)
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if !slices.Equal(got, want[arch]) {
				t.Errorf("%s reads registers %q, want %q", file, got, want[arch])
			}
		}
	}
}

// coreRelo matches a CO-RE relocation's text: its kind, the local struct
// and the accessor (the first index after 0 is the member).
var coreRelo = regexp.MustCompile(`^CORERelocation\([a-z_]+, Struct:"(\w+)"\[0:(\d+)[:\d]*\]`)

// registerFields returns the register structs' members ("pt_regs.si") that
// the programs of s read through CO-RE relocations.
func registerFields(s *ebpf.CollectionSpec) ([]string, error) {
	var out []string
	for _, p := range s.Programs {
		for _, ins := range p.Instructions {
			relo := btf.CORERelocationMetadata(&ins)
			if relo == nil {
				continue
			}
			m := coreRelo.FindStringSubmatch(relo.String())
			if m == nil || (m[1] != "pt_regs" && m[1] != "user_pt_regs") {
				continue
			}
			field, err := memberName(s.Types, m[1], m[2])
			if err != nil {
				return nil, err
			}
			if !slices.Contains(out, field) {
				out = append(out, field)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

func memberName(types *btf.Spec, name, index string) (string, error) {
	var st *btf.Struct
	if err := types.TypeByName(name, &st); err != nil {
		return "", fmt.Errorf("struct %s: %w", name, err)
	}
	i, _ := strconv.Atoi(index)
	if i >= len(st.Members) {
		return "", fmt.Errorf("struct %s has no member %d", name, i)
	}
	return name + "." + st.Members[i].Name, nil
}
