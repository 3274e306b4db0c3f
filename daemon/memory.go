package daemon

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/rs/zerolog"

	"github.com/drainwatch/drainwatch/collector/node"
)

// memoryLimitShare is the part of the container's memory limit the Go
// runtime aims under when GOMEMLIMIT is not set: the rest is the ring
// buffer, the binary's pages and the runtime's own overhead, none of which
// the Go heap limit covers.
const memoryLimitShare = 0.8

// gcPercent is the GC target when GOGC is unset. The daemon's live heap is
// small (~5 MiB with 110 pods) and its steady state allocates little (no
// allocation per kernel event), so collecting at +50 % instead of Go's
// +100 % keeps ~3 MiB less heap resident for a collection every few
// seconds of a few hundred µs of CPU.
const gcPercent = 50

// tuneMemory sets GOGC's default and the soft memory limit.
func tuneMemory(log zerolog.Logger) {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
	limitMemory(log)
}

// limitMemory sets the Go runtime's soft memory limit from the cgroup's
// memory limit when GOMEMLIMIT is unset (the chart sets it from
// limits.memory; a plain `drainwatch run` in a container does not), so the
// collector collects harder before the container is OOM-killed instead of
// letting the heap double between collections. It reads this process's own
// /proc and cgroup2 mount, not --proc-root or --cgroup-root (the host's).
func limitMemory(log zerolog.Logger) {
	if _, set := os.LookupEnv("GOMEMLIMIT"); set {
		return
	}
	root, err := node.Cgroup2Mount()
	if err != nil {
		log.Debug().Err(err).Msg("no cgroup2 mount: the Go heap has no soft limit")
		return
	}
	limit, path, err := cgroupMemoryLimit("/proc", root)
	if err != nil || limit == 0 {
		log.Debug().Err(err).Msg("no cgroup memory limit: the Go heap has no soft limit")
		return
	}
	soft := int64(float64(limit) * memoryLimitShare)
	debug.SetMemoryLimit(soft)
	log.Info().Int64("cgroup_limit_bytes", limit).Int64("go_memory_limit_bytes", soft).Str("cgroup", path).
		Msg("Go memory limit set from the cgroup's memory limit (GOMEMLIMIT unset)")
}

// cgroupMemoryLimit reads memory.max of this process's cgroup v2 (0: none).
func cgroupMemoryLimit(procRoot, cgroupRoot string) (int64, string, error) {
	rel, err := ownCgroup(filepath.Join(procRoot, "self", "cgroup"))
	if err != nil {
		return 0, "", err
	}
	path := filepath.Join(cgroupRoot, rel, "memory.max")
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, path, fmt.Errorf("reading the memory limit: %w", err)
	}
	return parseMemoryMax(string(raw)), path, nil
}

// parseMemoryMax reads memory.max: bytes, or "max" for no limit (0).
func parseMemoryMax(s string) int64 {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// ownCgroup is the cgroup v2 path ("0::/path") of /proc/self/cgroup.
func ownCgroup(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", fmt.Errorf("reading this process's cgroup: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rel, ok := strings.CutPrefix(sc.Text(), "0::"); ok {
			return rel, nil
		}
	}
	return "", fmt.Errorf("%s has no cgroup v2 line", file)
}
