package node

import "github.com/rs/zerolog"

// Filter selects what `drainwatch trace` watches: the network namespace
// and cgroup of a process, a network namespace (a path, or an inode
// number), a cgroup directory. The zero Filter selects nothing.
type Filter struct {
	PID    int
	Netns  string
	Cgroup string
}

// WatchFilter turns the filter into watched netns inodes and cgroup ids.
func WatchFilter(k Watcher, f Filter, log zerolog.Logger) error {
	if f.PID != 0 {
		ino, err := NetnsOfPID(f.PID)
		if err != nil {
			return err
		}
		dir, err := CgroupOfPID(f.PID)
		if err != nil {
			return err
		}
		if err := watchNetnsCgroup(k, ino, dir, log); err != nil {
			return err
		}
	}
	if f.Netns != "" {
		ino, err := ResolveNetns(f.Netns)
		if err != nil {
			return err
		}
		if err := watchNetnsCgroup(k, ino, "", log); err != nil {
			return err
		}
	}
	if f.Cgroup != "" {
		return watchNetnsCgroup(k, 0, f.Cgroup, log)
	}
	return nil
}

func watchNetnsCgroup(k Watcher, netns uint32, cgroupDir string, log zerolog.Logger) error {
	if netns != 0 {
		if err := k.WatchNetns(netns); err != nil {
			return err
		}
		log.Info().Uint32("netns", netns).Msg("watching network namespace")
	}
	if cgroupDir == "" {
		return nil
	}
	id, err := CgroupID(cgroupDir)
	if err != nil {
		return err
	}
	if err := k.WatchCgroup(id); err != nil {
		return err
	}
	log.Info().Uint64("cgroup_id", id).Str("cgroup", cgroupDir).Msg("watching cgroup")
	return nil
}
