package scale

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, 100 on Linux.
const clockTicks = 100

// childPID finds the child of this process running the named binary: the
// control plane's components are children of this process.
func childPID(comm string) (int, error) {
	paths, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return 0, err
	}
	me := os.Getpid()
	for _, p := range paths {
		f, err := readStat(p)
		if err == nil && f.ppid == me && f.comm == comm {
			return f.pid, nil
		}
	}
	return 0, fmt.Errorf("no child process named %s", comm)
}

type procStat struct {
	pid, ppid  int
	comm       string
	cpuSeconds float64 // utime + stime
}

func readStat(path string) (procStat, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return procStat{}, err
	}
	s := string(b)
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return procStat{}, fmt.Errorf("%s: unexpected format", path)
	}
	f := strings.Fields(s[closing+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return procStat{}, fmt.Errorf("%s: too few fields", path)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(s[:open]))
	ppid, _ := strconv.Atoi(f[1])
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return procStat{pid: pid, ppid: ppid, comm: s[open+1 : closing], cpuSeconds: (utime + stime) / clockTicks}, nil
}

// cpuSeconds is a process's user and system CPU time so far.
func cpuSeconds(pid int) (float64, error) {
	st, err := readStat(fmt.Sprintf("/proc/%d/stat", pid))
	return st.cpuSeconds, err
}

// rssBytes is a process's resident set size now (VmRSS).
func rssBytes(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}
