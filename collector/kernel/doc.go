// Package kernel owns drainwatch's eBPF side in user space: it loads and
// pins the bpf2go-generated objects (one per concern, built from bpf/),
// attaches the probes (falling back where a kernel lacks a hook), keeps the
// watched-scope maps, and decodes the ring buffer into collector.Events.
// Its tests need root and a real kernel.
package kernel
