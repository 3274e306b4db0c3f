package node

import (
	"fmt"
	"strconv"
	"syscall"
)

// NetnsInode returns the inode number of a network namespace file
// (/proc/<pid>/ns/net, /run/netns/<name>): the kernel's ns.inum, which the
// BPF side reports for every socket and task.
func NetnsInode(path string) (uint32, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0, fmt.Errorf("network namespace %s: %w", path, err)
	}
	return uint32(st.Ino), nil
}

// NetnsOfPID returns the network namespace inode of a process.
func NetnsOfPID(pid int) (uint32, error) {
	return NetnsInode(fmt.Sprintf("/proc/%d/ns/net", pid))
}

// ResolveNetns accepts what a user types: an inode number, or a path to a
// namespace file.
func ResolveNetns(arg string) (uint32, error) {
	if n, err := strconv.ParseUint(arg, 10, 32); err == nil {
		return uint32(n), nil
	}
	return NetnsInode(arg)
}
