package node

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// bind watches and binds the pod's scopes found by the last scan. The
// pod's network namespace is held open from then until release: a freed
// namespace's inode number is reused by the next pod's, and events of the
// new pod would be counted for the old one while both are bound to it.
func (s *Scopes) bind(ps *podScope) {
	found := s.cgroups[ps.uid]
	for name, id := range ps.containers {
		if ps.cgroups[name] != 0 {
			continue
		}
		for _, f := range found {
			if f.ContainerID == id {
				s.watchCgroup(ps, name, f.ID)
			}
		}
	}
	if ps.netnsFile != nil || ps.hostNet {
		return
	}
	// Any cgroup of the pod will do, the sandbox's included: it exists
	// before the containers start, so the netns is watched before they can
	// listen.
	for _, f := range found {
		file, ino, ok, err := s.openNetns(f.Dir)
		if err != nil || !ok {
			continue
		}
		if s.hostNetns(ino) {
			file.Close()
			s.log.Debug().Str("pod_uid", ps.uid).Msg("pod uses the host network: its sockets are not watched")
			ps.netns, ps.hostNet = ino, true // not watched, but no longer pending
			s.unwatchAddr(ps)                // the node's own address
			s.corr.HostNetwork(ps.uid)
			return
		}
		s.holdNetns(ps, file, ino)
		return
	}
}

// holdNetns binds and holds the pod's network namespace. A namespace
// restored from a checkpoint is held once a process of the pod shows it is
// still the pod's; if it is not, the restored inode belonged to a namespace
// that is gone and is let go.
func (s *Scopes) holdNetns(ps *podScope, file *os.File, ino uint32) {
	if ps.netns == ino {
		ps.netnsFile = file
		return // restored and still the pod's: already watched and bound
	}
	if ps.netns != 0 && s.netnsOwner[ps.netns] == ps.uid {
		delete(s.netnsOwner, ps.netns)
		s.logErr(s.kernel.UnwatchNetns(ps.netns), ps.uid)
	}
	ps.netns = 0
	if !s.watchNetns(ps, ino) {
		// Not held: the pod stays pending and a later scan retries.
		file.Close()
		return
	}
	ps.netnsFile = file
}

func (s *Scopes) watchCgroup(ps *podScope, container string, id uint64) {
	if err := s.kernel.WatchCgroup(id); err != nil {
		s.log.Warn().Err(err).Str("pod_uid", ps.uid).Str("container", container).Msg("watching container cgroup")
		return
	}
	ps.cgroups[container] = id
	s.cgroupOwner[id] = ps.uid
	s.corr.BindCgroup(ps.uid, container, id)
}

// unwatchCgroup forgets a container's cgroup (the container restarted:
// its next one has a new id). The kernel stops watching it unless another
// pod owns the id by now; without this a crash-looping pod would fill the
// BPF scopes map.
func (s *Scopes) unwatchCgroup(ps *podScope, container string) {
	id, ok := ps.cgroups[container]
	if !ok {
		return
	}
	delete(ps.cgroups, container)
	if s.cgroupOwner[id] == ps.uid {
		delete(s.cgroupOwner, id)
		s.logErr(s.kernel.UnwatchCgroup(id), ps.uid)
	}
}

// watchNetns watches and binds the pod's network namespace, and reports
// whether the kernel accepted it.
func (s *Scopes) watchNetns(ps *podScope, ino uint32) bool {
	if err := s.kernel.WatchNetns(ino); err != nil {
		s.log.Warn().Err(err).Str("pod_uid", ps.uid).Msg("watching pod network namespace")
		return false
	}
	ps.netns = ino
	s.netnsOwner[ino] = ps.uid
	s.corr.BindNetns(ps.uid, ino)
	s.log.Debug().Str("pod_uid", ps.uid).Uint32("netns", ino).Msg("watching pod network namespace")
	s.detail(ps)
	return true
}

// openNetns holds the namespace of the cgroup's processes.
func (s *Scopes) openNetns(dir string) (*os.File, uint32, bool, error) {
	f, ino, ok, err := OpenContainerNetns(s.proc, dir, s.processNetns())
	if s.noProcessNetns(err) {
		return OpenContainerNetns(s.proc, dir, nil)
	}
	return f, ino, ok, err
}

// processNetns is how OpenContainerNetns reads a namespace: from the
// kernel, or from /proc/<pid>/ns/net (nil) once the kernel could not.
func (s *Scopes) processNetns() func() (map[int]uint32, error) {
	if !s.nsProbed {
		s.nsProbed = true
		if _, err := s.kernel.ProcessNetns(); err != nil {
			s.noProcessNetns(&ProcessNetnsError{Err: err})
		}
	}
	if s.nsFiles {
		return nil
	}
	return s.kernel.ProcessNetns
}

// noProcessNetns falls back to /proc/<pid>/ns/net when the kernel cannot
// read process namespaces (Linux < 5.8: no task iterator), says so once,
// and reports whether it just did.
func (s *Scopes) noProcessNetns(err error) bool {
	var pe *ProcessNetnsError
	if s.nsFiles || !errors.As(err, &pe) {
		return false
	}
	s.nsFiles = true
	s.log.Warn().Err(err).Msg("reading pod network namespaces from /proc/<pid>/ns/net instead: that needs CAP_SYS_PTRACE for pods of other users")
	return true
}

// hostNetns reports whether ino is the daemon's or the host's network
// namespace (a hostNetwork pod): watching it would report all node traffic.
// The daemon's own needs no ptrace access; the host's is the kernel's
// initial one, its threads' (pid 0 in kernel.ProcessNetns), read from the
// kernel like the pods'.
func (s *Scopes) hostNetns(ino uint32) bool {
	var st syscall.Stat_t
	if syscall.Stat(filepath.Join(s.proc, "self/ns/net"), &st) == nil && uint32(st.Ino) == ino {
		return true
	}
	if !s.nsFiles {
		all, err := s.kernel.ProcessNetns()
		return err == nil && all[0] == ino
	}
	return syscall.Stat(filepath.Join(s.proc, "1/ns/net"), &st) == nil && uint32(st.Ino) == ino
}

// release stops watching a pod whose termination is complete. An inode or
// cgroup id already reused by another pod stays watched for that pod.
func (s *Scopes) Release(uid string) {
	ps := s.pods[uid]
	if ps == nil {
		return
	}
	delete(s.pods, uid)
	if ps.netnsFile != nil {
		ps.netnsFile.Close() // the namespace may go now
	}
	if ps.netns != 0 && s.netnsOwner[ps.netns] == uid {
		delete(s.netnsOwner, ps.netns)
		s.logErr(s.kernel.UnwatchNetns(ps.netns), uid)
	}
	for _, id := range ps.cgroups {
		if s.cgroupOwner[id] == uid {
			delete(s.cgroupOwner, id)
			s.logErr(s.kernel.UnwatchCgroup(id), uid)
		}
	}
	s.unwatchAddr(ps)
}

// watchAddrs lists the pod's addresses in the kernel, so that the
// kubelet's probes and other node-local connections to them carry their
// source. An address that fails is left out; the pod's next update tries
// it again.
func (s *Scopes) watchAddrs(ps *podScope, addrs []netip.Addr) {
	s.unwatchAddr(ps)
	for _, ip := range addrs {
		if err := s.kernel.WatchAddr(ip); err != nil {
			s.log.Warn().Err(err).Str("pod_uid", ps.uid).Stringer("ip", ip).Msg("watching pod address: probes to it are counted as clients")
			continue
		}
		ps.ips = append(ps.ips, ip)
		s.addrOwner[ip] = ps.uid
	}
	s.blackholeAddr(ps)
}

func (s *Scopes) unwatchAddr(ps *podScope) {
	for _, ip := range ps.ips {
		if s.addrOwner[ip] == ps.uid {
			delete(s.addrOwner, ip)
			s.logErr(s.kernel.UnwatchAddr(ip), ps.uid)
		}
	}
	ps.ips, ps.blackholed = nil, nil
}

func (s *Scopes) logErr(err error, uid string) {
	if err != nil && !os.IsNotExist(err) {
		s.log.Warn().Err(err).Str("pod_uid", uid).Msg("unwatching pod scope")
	}
}

// watchedPods returns the pods whose network namespace is watched.
func (s *Scopes) WatchedPods() map[string]bool {
	out := make(map[string]bool, len(s.netnsOwner))
	for _, uid := range s.netnsOwner {
		out[uid] = true
	}
	return out
}

// records returns the watched scopes for the checkpoint.
func (s *Scopes) Records() []ScopeRecord {
	out := make([]ScopeRecord, 0, len(s.pods))
	for _, ps := range s.pods {
		r := ScopeRecord{PodUID: ps.uid, Cgroups: map[string]uint64{}}
		if s.netnsOwner[ps.netns] == ps.uid {
			r.Netns = ps.netns
		}
		for name, id := range ps.cgroups {
			r.Cgroups[name] = id
		}
		out = append(out, r)
	}
	return out
}

// restore watches again the scopes of a previous run: the tail of a pod
// deleted while the daemon was down is still attributed. Containers are
// learnt again from the API; a pod the API no longer lists stays counted as
// gone since now, and is released when its termination completes.
func (s *Scopes) Restore(recs []ScopeRecord, now time.Time) {
	for _, r := range recs {
		ps := &podScope{uid: r.PodUID, containers: map[string]string{}, cgroups: map[string]uint64{}, gone: now}
		s.pods[r.PodUID] = ps
		if r.Netns != 0 {
			s.watchNetns(ps, r.Netns)
		}
		for name, id := range r.Cgroups {
			s.watchCgroup(ps, name, id)
		}
	}
}

// closeFiles lets go of every held network namespace (daemon shutdown).
func (s *Scopes) CloseFiles() {
	for _, ps := range s.pods {
		if ps.netnsFile != nil {
			ps.netnsFile.Close()
			ps.netnsFile = nil
		}
	}
}
