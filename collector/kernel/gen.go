package kernel

// One bpf2go run per BPF object (one object per concern, see bpf/), each
// for amd64 (*_x86_bpfel) and arm64 (*_arm64_bpfel): the build tags of each
// pair pick the one a GOARCH links, and bpf/vmlinux.h the header of the
// target architecture (__TARGET_ARCH_x86, __TARGET_ARCH_arm64). The
// generated .go and .o files are committed so `go build` needs no clang;
// `make generate` rebuilds them with Debian's clang-14 and `make
// check-generate` fails when that changes a byte. bpf2go strips DWARF and
// maps the source directory to a relative one, so the output does not depend
// on where the checkout lives.

//go:generate go tool bpf2go -cc clang-14 -cflags "-O2 -g -Wall -Werror" -target amd64,arm64 -go-package kernel -output-stem sockstate -type event sockState ../../bpf/sock_state.bpf.c -- -I../../bpf
//go:generate go tool bpf2go -cc clang-14 -cflags "-O2 -g -Wall -Werror" -target amd64,arm64 -go-package kernel -output-stem inflight inflight ../../bpf/inflight.bpf.c -- -I../../bpf
//go:generate go tool bpf2go -cc clang-14 -cflags "-O2 -g -Wall -Werror" -target amd64,arm64 -go-package kernel -output-stem refused refused ../../bpf/refused.bpf.c -- -I../../bpf
//go:generate go tool bpf2go -cc clang-14 -cflags "-O2 -g -Wall -Werror" -target amd64,arm64 -go-package kernel -output-stem signal signal ../../bpf/signal.bpf.c -- -I../../bpf
//go:generate go tool bpf2go -cc clang-14 -cflags "-O2 -g -Wall -Werror" -target amd64,arm64 -go-package kernel -output-stem exit exit ../../bpf/exit.bpf.c -- -I../../bpf
//go:generate go tool bpf2go -cc clang-14 -cflags "-O2 -g -Wall -Werror" -target amd64,arm64 -go-package kernel -output-stem tasknetns taskNetns ../../bpf/task_netns.bpf.c -- -I../../bpf
//go:generate go tool bpf2go -cc clang-14 -cflags "-O2 -g -Wall -Werror" -target amd64,arm64 -go-package kernel -output-stem blackhole blackhole ../../bpf/blackhole.bpf.c -- -I../../bpf
