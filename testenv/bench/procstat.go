package bench

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/drainwatch/drainwatch/testenv/netlab"
)

// clockTick is USER_HZ, the unit of utime and stime in /proc/<pid>/stat:
// 100 on every Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

// processCPU is the user plus system CPU time of pid and its finished
// threads, from /proc/<pid>/stat (fields 14 and 15).
func processCPU(pid int) (time.Duration, error) {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, fmt.Errorf("reading the daemon's CPU time: %w", err)
	}
	// The command name may hold spaces; the fields after it may not.
	s := string(raw)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the name", pid, len(fields))
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q stime %q", pid, fields[11], fields[12])
	}
	return time.Duration(utime+stime) * clockTick, nil
}

// Memory is a process's resident memory in KiB, from /proc/<pid>/status:
// VmRSS = RssAnon + RssFile + RssShmem.
type Memory struct {
	RSS, HWM, Anon, File, Shmem int
}

// ProcessMemory reads pid's VmRSS, VmHWM, RssAnon, RssFile and RssShmem.
func ProcessMemory(pid int) (m Memory, err error) {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return m, fmt.Errorf("reading the daemon's memory: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		n, _ := strconv.Atoi(fields[1])
		switch fields[0] {
		case "VmRSS:":
			m.RSS = n
		case "VmHWM:":
			m.HWM = n
		case "RssAnon:":
			m.Anon = n
		case "RssFile:":
			m.File = n
		case "RssShmem:":
			m.Shmem = n
		}
	}
	return m, sc.Err()
}

// cgroupCPU is usage_usec of a cgroup v2 directory's cpu.stat, which the
// kernel keeps for every cgroup whether or not the cpu controller is on.
func cgroupCPU(dir string) (time.Duration, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		return 0, fmt.Errorf("reading the server pod's CPU time: %w", err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
			us, err := strconv.ParseInt(v, 10, 64)
			return time.Duration(us) * time.Microsecond, err
		}
	}
	return 0, fmt.Errorf("%s/cpu.stat has no usage_usec", dir)
}

// passiveOpens is the Tcp PassiveOpens counter of pid's network namespace:
// the connections the server accepted, counted by the kernel.
func passiveOpens(pid int) (uint64, error) {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "net", "snmp"))
	if err != nil {
		return 0, fmt.Errorf("reading the server's TCP counters: %w", err)
	}
	n, err := netlab.TCPCounter(raw, "PassiveOpens")
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/net/snmp: %w", pid, err)
	}
	return n, nil
}

// firstPID is a process of the cgroup subtree dir (the pod's slice holds
// its containers' scopes).
func firstPID(dir string) (int, error) {
	var pid int
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || pid != 0 || d.IsDir() || d.Name() != "cgroup.procs" {
			return err
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if f := strings.Fields(string(raw)); len(f) > 0 {
			pid, _ = strconv.Atoi(f[0])
		}
		return nil
	})
	if err == nil && pid == 0 {
		err = fmt.Errorf("no process in cgroup %s", dir)
	}
	return pid, err
}
